package access

import (
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// PeeringUserTenantRules are the peering user's permissions in the tenant namespace of its
// consumer: the nonce, the consumer's Tenant, and reading the manager's binding.
// Kubernetes cannot restrict create to a name: the Tenant it may create is refused unless
// it is named after its cluster, and the only Secret it may create is the nonce, which
// the ValidatingAdmissionPolicy wire.PeeringUserPolicyName enforces.
func PeeringUserTenantRules(consumerID string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{wire.NonceSecretName}, Verbs: []string{"get", "update", "delete"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, ResourceNames: []string{consumerID},
			Verbs: []string{"get", "list", "watch", "patch", "update", "delete"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, ResourceNames: []string{wire.ManagerName}, Verbs: []string{"get"}},
		retireOwnBinding(consumerID),
	}
}

// retireOwnBinding lets a peering user delete its own RoleBinding of a namespace, by name:
// the binding deletes itself through the Role it binds, which is then unbound and grants
// nothing (PeeringUserClusterRules deletes it). A Role deleted first would leave its
// binding, which a later Role of the same name would revive: never that order.
func retireOwnBinding(consumerID string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
		ResourceNames: []string{wire.PeeringUserClusterObjectName(consumerID)}, Verbs: []string{"delete"}}
}

// PeeringUserLiqoRules are its permissions in the Liqo namespace: reading the cluster ID,
// the manager's Lease and the tenant record of its consumer, by name.
func PeeringUserLiqoRules(consumerID string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{wire.ClusterIDConfigMapName, wire.TenantRecordName(consumerID)}, Verbs: []string{"get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{wire.ManagerName}, Verbs: []string{"get"}},
		retireOwnBinding(consumerID),
	}
}

// PeeringUserClusterRules are its only cluster-wide permissions: reading, by name, the
// tenant namespace of its consumer and kube-system (whose UID tells two clusters apart);
// and retiring itself (handshake.RetirePeeringUser), by name only: deleting its Roles once
// their bindings deleted themselves, then its ClusterRoleBinding, last. Its ClusterRole
// is the one object it leaves, unbound: it grants nothing, and a later binding of it needs
// what binding any ClusterRole needs. Every name is liqo-peering-user-<its consumer>: it
// can delete no other consumer's object, nor any binding but its own. The provider's
// manager holds no such power (a stolen manager token would delete every binding).
func PeeringUserClusterRules(consumerID string) []rbacv1.PolicyRule {
	own := []string{wire.PeeringUserClusterObjectName(consumerID)}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{wire.TenantNamespaceName(consumerID), "kube-system"}, Verbs: []string{"get"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "clusterrolebindings"}, ResourceNames: own, Verbs: []string{"delete"}},
	}
}

// ForgePeeringUserAccess are the Roles, RoleBindings, ClusterRole and ClusterRoleBinding of
// peering user user of consumerID, whose tenant namespace is tn, in Liqo namespace liqoNS,
// all named wire.PeeringUserClusterObjectName(consumerID).
func ForgePeeringUserAccess(liqoNS, tn, consumerID, user string) []client.Object {
	labels := map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: consumerID, wire.PeeringUserLabel: user}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	// One name per consumer, for every object: a Role named alike for every consumer in
	// the Liqo namespace would be overwritten by the next consumer's peering user.
	name := wire.PeeringUserClusterObjectName(consumerID)
	var objs []client.Object
	for _, r := range []struct {
		ns    string
		rules []rbacv1.PolicyRule
	}{{tn, PeeringUserTenantRules(consumerID)}, {liqoNS, PeeringUserLiqoRules(consumerID)}} {
		meta := metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta, Rules: r.rules},
			&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	meta := metav1.ObjectMeta{Name: name, Labels: labels}
	return append(objs,
		&rbacv1.ClusterRole{TypeMeta: rbacType("ClusterRole"), ObjectMeta: meta, Rules: PeeringUserClusterRules(consumerID)},
		&rbacv1.ClusterRoleBinding{TypeMeta: rbacType("ClusterRoleBinding"), ObjectMeta: meta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
}

// PeeringUserRules are all the permissions of the peering user of consumerID, with the
// namespace each applies in ("" for cluster-wide), for proofs of revocation.
func PeeringUserRules(liqoNS, consumerID string) map[string][]rbacv1.PolicyRule {
	return map[string][]rbacv1.PolicyRule{
		wire.TenantNamespaceName(consumerID): PeeringUserTenantRules(consumerID),
		liqoNS:                               PeeringUserLiqoRules(consumerID),
		"":                                   PeeringUserClusterRules(consumerID),
	}
}

// peeringUserValidations are what a Secret written by a peering user must be: the nonce of
// its own consumer and nothing else. RBAC lets it create Secrets in the tenant namespace
// (it cannot restrict create to a name); without these, it could create a
// service-account token Secret (a credential that outlives its TTL and its deletion), or
// smuggle data, finalizers or owners into an object this cluster's controllers read.
func peeringUserValidations() []admissionregistrationv1.Validation {
	labels := "(has(object.metadata.labels) ? object.metadata.labels : {})"
	annotations := "(has(object.metadata.annotations) ? object.metadata.annotations : {})"
	return []admissionregistrationv1.Validation{
		{Expression: "object.metadata.name == '" + wire.NonceSecretName + "' && " + labels + "['" + wire.NonceLabel + "'] == 'true'",
			Message: "a peering user may create or change no Secret but the nonce " + wire.NonceSecretName + " (labelled " + wire.NonceLabel + "=true)"},
		{Expression: "has(object.metadata.labels) && '" + wire.RemoteClusterIDLabel + "' in object.metadata.labels && request.userInfo.username.startsWith('" + wire.PeeringUserPrefix + "' + object.metadata.labels['" + wire.RemoteClusterIDLabel + "'] + '-')",
			Message: "the nonce of a peering user is labelled " + wire.RemoteClusterIDLabel + " with its own consumer's cluster ID"},
		{Expression: "!has(object.type) || object.type == 'Opaque'",
			Message: "the nonce is an Opaque Secret (a service-account token or any other type is refused)"},
		{Expression: "!has(object.data) || object.data.all(k, k == '" + wire.NonceField + "')",
			Message: "the nonce holds the data key " + wire.NonceField + " only"},
		{Expression: labels + ".all(k, k in ['" + wire.NonceLabel + "', '" + wire.RemoteClusterIDLabel + "'])",
			Message: "the nonce carries the labels " + wire.NonceLabel + " and " + wire.RemoteClusterIDLabel + " only"},
		{Expression: annotations + ".all(k, k in ['" + wire.NonceIssuedAtAnnotation + "', '" + wire.NonceConsumedAtAnnotation + "'])",
			Message: "the nonce carries the annotations " + wire.NonceIssuedAtAnnotation + " and " + wire.NonceConsumedAtAnnotation + " only (no service-account annotation)"},
		{Expression: "!has(object.immutable) || !object.immutable",
			Message: "the nonce is not immutable: earlier providers annotated it once consumed"},
		{Expression: "!has(object.metadata.finalizers) && !has(object.metadata.ownerReferences)",
			Message: "the nonce carries no finalizer and no owner reference"},
	}
}

// ForgePeeringUserPolicy are the ValidatingAdmissionPolicies, and their bindings, that
// bound peering users where RBAC cannot: they create no Secret but a nonce (RBAC cannot
// restrict create to a name, and a Secret created in a tenant namespace may be read by
// this cluster's controllers); and, retiring themselves, they delete Roles and
// RoleBindings only in their consumer's tenant namespace and the Liqo namespace liqoNS
// (the ClusterRole that lets a peering user delete its Roles by name cannot name a
// namespace: without this, a Role of that name in any namespace would be in its reach).
func ForgePeeringUserPolicy(liqoNS string) []client.Object {
	isPeeringUser := []admissionregistrationv1.MatchCondition{{
		Name: "peering-user", Expression: "request.userInfo.username.startsWith('" + wire.PeeringUserPrefix + "')",
	}}
	deletes := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{rbacv1.GroupName}, APIVersions: []string{"*"}, Resources: []string{"roles", "rolebindings"}},
		},
	}}}
	ownNamespace := "request.namespace == '" + liqoNS + "' || (oldObject.metadata.name.startsWith('" + wire.PeeringUserObjectName + "-') && " +
		"request.namespace == '" + wire.TenantNamespacePrefix + "' + oldObject.metadata.name.substring(" + strconv.Itoa(len(wire.PeeringUserObjectName)+1) + "))"
	return append(denyingPolicy(wire.PeeringUserPolicyName, createsAndUpdates("", "v1", "secrets"), isPeeringUser, peeringUserValidations()),
		denyingPolicy(wire.PeeringUserDeletesPolicyName, deletes, isPeeringUser, []admissionregistrationv1.Validation{{
			Expression: ownNamespace,
			Message:    "a peering user deletes Roles and RoleBindings only in its consumer's tenant namespace and the Liqo namespace: its own, retiring itself",
			// A permission refused, as RBAC refuses it (403), not an invalid object.
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}})...)
}
