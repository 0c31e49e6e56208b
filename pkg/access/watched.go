package access

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Watched is one kind liqo-auth-manager's controllers watch or read from the cache: the
// one place a watch is declared. The manager's cache (what it holds of the kind), the kinds
// a runner waits for, the read permissions of its ClusterRole and the check that a
// controller registers only declared watches are all derived from ManagerWatched.
type Watched struct {
	// Object is an empty object of the kind.
	Object client.Object
	// Group and Resource name the kind for RBAC.
	Group, Resource string
	// Roles are the sides whose controllers watch it.
	Roles Role
	// Label, when set, is the only label (key=value, or key alone: it exists) the cache
	// holds objects of the kind with; InLiqoNamespace limits it to the Liqo namespace.
	Label           string
	InLiqoNamespace bool
	// AllInLiqoNamespace says the long-running manager's cache also holds every object of
	// the kind in the Liqo namespace, whatever its labels: the administrator's namespace
	// (the cluster's keys, a Peering's bootstrap Secret).
	AllInLiqoNamespace bool
	// Stripped says the cache keeps only what the binding scan needs (no annotations).
	Stripped bool
	// ReadBy names the controllers (and the metrics collector) that read the kind.
	ReadBy string
	// Writers are the weakest principals who may write objects of the kind that the
	// controllers read: TestPrincipalMatrix acts as each, and docs/security.md's threat
	// model lists them (ThreatModel).
	Writers []Writer
}

// ManagerWatched are the kinds liqo-auth-manager's controllers watch.
func ManagerWatched() []Watched {
	return []Watched{
		{Object: &corev1.Secret{}, Group: "", Resource: "secrets", Roles: Both, Label: wire.RemoteClusterIDLabel, AllInLiqoNamespace: true,
			ReadBy: "noncecreator, tenant, noncesigner, identity, renewfollower, metrics, rotation", Writers: []Writer{nsCreatorSecrets, secretWriter, peeringUserNonce}},
		{Object: &corev1.Namespace{}, Group: "", Resource: "namespaces", Roles: Both, Label: wire.TenantNamespaceLabel + "=true",
			ReadBy: "designation, every placement check", Writers: []Writer{nsCreatorNS}},
		// This project's ConfigMaps of the Liqo namespace: the tenant records and
		// liqo-auth-config (whether approval is required), all written by its administrator
		// (and the records completed by the manager).
		{Object: &corev1.ConfigMap{}, Group: "", Resource: "configmaps", Roles: Both, Label: wire.ManagedByLabel + "=" + wire.ManagedByValue, InLiqoNamespace: true,
			ReadBy: "every controller (placement, pins, the administrator's state), tenant (the approvals, and whether approval is required)", Writers: []Writer{nsCreatorRecords, liqoNSWriter}},
		{Object: &authv1beta1.Tenant{}, Group: authv1beta1.GroupVersion.Group, Resource: "tenants", Roles: Provider,
			ReadBy: "tenant, peergc, providerslice, renewanswer, keyrotation, metrics", Writers: []Writer{nsCreatorTenants, tenantWriter, peeringUserTenant, statusTenants, tenantLeaves}},
		{Object: &authv1beta1.Renew{}, Group: authv1beta1.GroupVersion.Group, Resource: "renews", Roles: Provider,
			ReadBy: "renewanswer, keyrotation", Writers: []Writer{tenantRenews, nsCreatorRenews, statusRenews}},
		{Object: &authv1beta1.ResourceSlice{}, Group: authv1beta1.GroupVersion.Group, Resource: "resourceslices", Roles: Both,
			ReadBy: "tenant (its cluster ID against the slice users), providerslice, consumerslice, peergc, metrics", Writers: []Writer{tenantSlices, nsCreatorSlices, sliceWriter, statusSlices}},
		{Object: &authv1beta1.Identity{}, Group: authv1beta1.GroupVersion.Group, Resource: "identities", Roles: Consumer,
			ReadBy: "identity, renewfollower, consumerslice, peering, metrics", Writers: []Writer{nsCreatorIDs, identityWriter, statusIDs}},
		{Object: &authv1beta1.Peering{}, Group: authv1beta1.GroupVersion.Group, Resource: "peerings", Roles: Consumer, InLiqoNamespace: true,
			ReadBy: "peering", Writers: []Writer{liqoNSPeerings, statusPeerings}},
		{Object: &rbacv1.RoleBinding{}, Group: rbacv1.GroupName, Resource: "rolebindings", Roles: Provider, Stripped: true,
			ReadBy: "tenant, providerslice (the binding scan), keyrotation (the old subject's removal)", Writers: []Writer{nsCreatorBindings, peeringUserBindings}},
		{Object: &rbacv1.ClusterRoleBinding{}, Group: rbacv1.GroupName, Resource: "clusterrolebindings", Roles: Provider, Stripped: true,
			ReadBy: "tenant, providerslice (the binding scan)", Writers: []Writer{clusterRoleBinder, peeringUserCRB}},
		{Object: &rbacv1.Role{}, Group: rbacv1.GroupName, Resource: "roles", Roles: Provider, Label: wire.ManagedByLabel + "=" + wire.ManagedByValue,
			ReadBy: "providerslice (grants judged from Roles)", Writers: []Writer{nsCreatorRoles, roleWriter, peeringUserRoles}},
		{Object: &certificatesv1.CertificateSigningRequest{}, Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Roles: Provider, Label: wire.ManagedByLabel + "=" + wire.ManagedByValue,
			ReadBy: "tenant, providerslice (the requester check)", Writers: []Writer{csrCreator}},
	}
}

// WatchedBy are the kinds the controllers of role watch.
func WatchedBy(role Role) []Watched {
	var out []Watched
	for _, w := range ManagerWatched() {
		if w.Roles&role != 0 {
			out = append(out, w)
		}
	}
	return out
}

// watchRules are the read permissions the watched kinds need, one rule per group: those
// cached cluster-wide (inLiqoNamespace false) or only in the Liqo namespace.
func watchRules(inLiqoNamespace bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	at := map[string]int{}
	for _, w := range ManagerWatched() {
		if w.InLiqoNamespace != inLiqoNamespace {
			continue
		}
		i, ok := at[w.Group]
		if !ok {
			i = len(rules)
			at[w.Group] = i
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{w.Group}, Verbs: []string{"get", "list", "watch"}})
		}
		rules[i].Resources = append(rules[i].Resources, w.Resource)
	}
	return rules
}
