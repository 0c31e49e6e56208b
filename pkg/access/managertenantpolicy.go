package access

import (
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// CEL expressions about the namespace of the request, as the tenant namespace of the peer
// its label names.
const (
	nsLabels      = "(has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})"
	nsAnnotations = "(has(namespaceObject.metadata.annotations) ? namespaceObject.metadata.annotations : {})"
	// nsPeer is the peer the namespace's label names ('' when none).
	nsPeer = "(('" + wire.RemoteClusterIDLabel + "' in " + nsLabels + ") ? " + nsLabels + "['" + wire.RemoteClusterIDLabel + "'] : '')"
	// peerSubjects is the CEL test that a tenant binding names the namespace's peer only:
	// User <peer> (Liqo's form), Group <key group of peer> (a key-bound identity,
	// IdentitySubjects), or both while the peer moves its identity to a new key.
	peerSubjects = "has(object.subjects) && object.subjects.size() >= 1 && object.subjects.size() <= 2 && object.subjects.all(s, " +
		"(s.kind == 'User' && s.name == " + nsPeer + ") || (s.kind == 'Group' && s.name.startsWith('" + wire.KeyGroupPrefix + "' + " + nsPeer + " + ':') && " +
		"s.name.substring(size('" + wire.KeyGroupPrefix + "' + " + nsPeer + ") + 1).matches('^sha256:[0-9a-f]{64}$')))"
	// sliceOf is the slice a liqo-resourceslice-<slice> object is named for.
	sliceOf = "object.metadata.name.substring(" + "size('liqo-resourceslice-'))"
	// placeholders stand, in the rules forged with a name, for that name's expression.
	peerPlaceholder  = "\x00peer"
	slicePlaceholder = "\x00slice"
)

// forgeManagerTenantPolicies bound what liqo-auth-manager's ServiceAccount writes in tenant
// namespaces to exactly what its controllers make there. RBAC cannot: it lets the manager
// create RoleBindings anywhere (to bind itself in a tenant namespace another tool made),
// bind any Role of a tenant namespace and create Leases of any name there.
//
//   - liqo-auth-manager-bindings: every RoleBinding it writes is one of four, in a
//     liqo-tenant-<id> labelled for <id>: its own (liqo-auth-manager-tenant to its
//     ServiceAccount, only where the API server recorded the namespace's creator), the
//     tenant's control-plane and reader bindings (to user <id>), a slice's (Role
//     liqo-resourceslice-<slice> to user <slice>-<12 hex digits>).
//   - liqo-auth-manager-tenant-writes: outside the Liqo namespace, it writes those
//     bindings, the Roles they name (with exactly their rules) and the presence Lease only
//     where its own binding exists: in a namespace this cluster's administrator (liqoctl)
//     or designation gave it. The policy asks the authorizer whether the manager may
//     create Identities there, which only that binding grants it.
func forgeManagerTenantPolicies(liqoNS string) []client.Object {
	isManager := []admissionregistrationv1.MatchCondition{{Name: "liqo-auth-manager", Expression: "request.userInfo.username == '" + ManagerUser(liqoNS) + "'"}}
	// Its own binding it makes only where it designates: a namespace whose creator the API
	// server recorded (liqoctl binds it in the namespaces it makes or adopts).
	own := "object.metadata.name == '" + wire.ManagerName + "' && " + roleRef("ClusterRole", "'"+wire.ManagerTenantRoleName+"'") + " && " +
		subjectIs("ServiceAccount", "'"+wire.ManagerName+"'", "'"+liqoNS+"'") + " && '" + wire.CreatedByAnnotation + "' in " + nsAnnotations
	controlPlane := "object.metadata.name == '" + wire.ControlPlaneBindingName + "' && " + roleRef("ClusterRole", "'"+wire.ControlPlaneRoleName+"'") + " && " + peerSubjects
	reader := "object.metadata.name == '" + wire.TenantReaderName + "' && " + roleRef("Role", "'"+wire.TenantReaderName+"'") + " && " + peerSubjects
	// A slice's binding names its user, exactly <slice>-<12 hex digits> (authn.SliceUserName:
	// not the user of a slice whose name begins with <slice>-), or that user's key group
	// (authn.KeyGroup: <prefix><user>:sha256:<64 hex digits>).
	sliceUser := "size(object.subjects[0].name) == size(" + sliceOf + ") + 13 && object.subjects[0].name.startsWith(" + sliceOf + " + '-') && " +
		"object.subjects[0].name.substring(size(" + sliceOf + ") + 1).matches('^[0-9a-f]{12}$')"
	sliceGroup := "object.subjects[0].name.startsWith('" + wire.KeyGroupPrefix + "' + " + sliceOf + " + '-') && " +
		"object.subjects[0].name.substring(size('" + wire.KeyGroupPrefix + "' + " + sliceOf + ") + 1).matches('^[0-9a-f]{12}:sha256:[0-9a-f]{64}$')"
	slice := "object.metadata.name.startsWith('liqo-resourceslice-') && " + roleRef("Role", "object.metadata.name") + " && " +
		"((" + subjectIs("User", "", "") + " && " + sliceUser + ") || (" + subjectIs("Group", "", "") + " && " + sliceGroup + "))"
	bindings := denyingPolicy(wire.ManagerBindingPolicyName, createsAndUpdates(rbacv1.GroupName, "*", "rolebindings"), isManager,
		[]admissionregistrationv1.Validation{
			{Expression: "'" + wire.TenantNamespaceLabel + "' in " + nsLabels + " && " + nsLabels + "['" + wire.TenantNamespaceLabel + "'] == 'true' && " + nsPeer + " != '' && " +
				"namespaceObject.metadata.name == '" + wire.TenantNamespacePrefix + "' + " + nsPeer,
				Message: "liqo-auth-manager writes RoleBindings only in liqo-tenant-<id> namespaces labelled for <id>"},
			{Expression: "(" + own + ") || (" + controlPlane + ") || (" + reader + ") || (" + slice + ")",
				Message: "liqo-auth-manager writes only its own binding (where the API server recorded the namespace's creator), the tenant's control-plane and reader bindings to the namespace's peer (its user, or its key groups), and a slice's binding to its user (or its key group)"},
		})

	tenantWrites := createsAndUpdates(rbacv1.GroupName, "*", "rolebindings", "roles")
	tenantWrites.ResourceRules = append(tenantWrites.ResourceRules, createsAndUpdates("coordination.k8s.io", "*", "leases").ResourceRules...)
	notRole, notLease := "request.resource.resource != 'roles'", "request.resource.resource != 'leases'"
	// Only its binding liqo-auth-manager-tenant gives the manager the creation of
	// Identities in a namespace: the authorizer's answer says it is bound there.
	bound := "authorizer.group('" + authv1beta1.GroupVersion.Group + "').resource('identities').namespace(request.namespace).check('create').allowed()"
	tenantPolicy := denyingPolicy(wire.ManagerTenantPolicyName, tenantWrites, append(isManager,
		admissionregistrationv1.MatchCondition{Name: "outside-liqo-namespace", Expression: "request.namespace != '" + liqoNS + "'"},
		admissionregistrationv1.MatchCondition{Name: "not-its-own-binding", Expression: "request.resource.resource != 'rolebindings' || object.metadata.name != '" + wire.ManagerName + "'"}),
		[]admissionregistrationv1.Validation{
			{Expression: bound,
				Message: "liqo-auth-manager writes in a namespace only where it is bound as a tenant namespace's manager (RoleBinding " + wire.ManagerName + ")"},
			{Expression: notRole + " || (object.metadata.name == '" + wire.TenantReaderName + "' && " + rulesAre(TenantReaderRules(peerPlaceholder)) + ") || " +
				"(object.metadata.name.startsWith('liqo-resourceslice-') && " + rulesAre(SliceRules(slicePlaceholder)) + ")",
				Message: "liqo-auth-manager writes only the tenant's reader Role and slices' Roles, with exactly their rules"},
			{Expression: notLease + " || object.metadata.name == '" + wire.PresenceLeaseName + "'",
				Message: "liqo-auth-manager creates only the Lease " + wire.PresenceLeaseName + " in a tenant namespace"},
		})
	return append(append(append(bindings, tenantPolicy...), forgePresenceLeasePolicy()...), forgeManagerNamespacePolicy(isManager)...)
}

// PresenceLeasePolicyName is the ValidatingAdmissionPolicy (and its binding) that keeps the
// presence Lease's last sign of life from going back.
const PresenceLeasePolicyName = "liqo-auth-presence-lease"

// forgePresenceLeasePolicy keeps the presence Lease's last sign of life (the latest of its
// creation, acquireTime and renewTime, as peergc.LastSignOfLife reads it) from going back,
// whoever writes: a Lease writer who cleared or back-dated those times would have a
// consumer that renewed seconds ago collected at once
// (TestPresenceLeaseWriterCannotCollectALiveConsumer). The consumer's renewals and the
// manager's adoption (acquireTime now, renewTime cleared) move it forward; deleting the
// Lease gives no older time, the manager makes a new one. It holds for the manager too,
// whatever identity it runs as, and for administrators, who may delete the Tenant anyway.
func forgePresenceLeasePolicy() []client.Object {
	match := createsAndUpdates("coordination.k8s.io", "*", "leases")
	match.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	last := func(o string) string {
		renew, acquire := o+".spec.renewTime", o+".spec.acquireTime"
		latest := "(has(" + acquire + ") && " + acquire + " > " + o + ".metadata.creationTimestamp ? " + acquire + " : " + o + ".metadata.creationTimestamp)"
		return "(has(" + renew + ") && " + renew + " > " + latest + " ? " + renew + " : " + latest + ")"
	}
	return denyingPolicy(PresenceLeasePolicyName, match, []admissionregistrationv1.MatchCondition{
		{Name: "presence-lease", Expression: "object.metadata.name == '" + wire.PresenceLeaseName + "'"},
	}, []admissionregistrationv1.Validation{
		{Expression: last("object") + " >= " + last("oldObject"),
			Message: "the presence Lease's last sign of life (the latest of its creation, acquireTime and renewTime) does not go back: peergc counts from it"},
	})
}

// roleRef is the CEL test that the binding refers to the role of kind named by the
// expression name.
func roleRef(kind, name string) string {
	return "object.roleRef.apiGroup == '" + rbacv1.GroupName + "' && object.roleRef.kind == '" + kind + "' && object.roleRef.name == " + name
}

// subjectIs is the CEL test that the binding has exactly one subject, of kind, named by
// the expression name (any name when empty), in namespace ns (an expression; none when
// empty).
func subjectIs(kind, name, ns string) string {
	e := "has(object.subjects) && object.subjects.size() == 1 && object.subjects[0].kind == '" + kind + "'"
	if name != "" {
		e += " && object.subjects[0].name == " + name
	}
	if ns != "" {
		e += " && object.subjects[0].namespace == " + ns
	}
	return e
}

// rulesAre is the CEL test that a Role's rules are exactly rules, in order, where the
// placeholders stand for the namespace's peer and the slice the Role is named for.
func rulesAre(rules []rbacv1.PolicyRule) string {
	list := func(field string, items []string) string {
		quoted := make([]string, 0, len(items))
		for _, it := range items {
			switch it {
			case peerPlaceholder:
				quoted = append(quoted, nsPeer)
			case slicePlaceholder:
				quoted = append(quoted, sliceOf)
			default:
				quoted = append(quoted, "'"+it+"'")
			}
		}
		return "(has(r." + field + ") ? r." + field + " : []) == [" + strings.Join(quoted, ", ") + "]"
	}
	rs := "(has(object.rules) ? object.rules : [])"
	out := []string{"size(" + rs + ") == " + strconv.Itoa(len(rules))}
	for i, r := range rules {
		checks := []string{list("apiGroups", r.APIGroups), list("resources", r.Resources), list("resourceNames", r.ResourceNames),
			list("verbs", r.Verbs), list("nonResourceURLs", r.NonResourceURLs)}
		out = append(out, "["+rs+"["+strconv.Itoa(i)+"]].all(r, "+strings.Join(checks, " && ")+")")
	}
	return "(" + strings.Join(out, " && ") + ")"
}

// forgeManagerNamespacePolicy is the policy that lets the manager (isManager) create only
// tenant namespaces: RBAC cannot restrict create to a name, and a declared peering (a
// Peering) makes the consumer's tenant namespace of its provider, as liqoctl authenticate
// does. A stolen manager token may create liqo-tenant-<id>, labelled for <id>, nothing
// else.
func forgeManagerNamespacePolicy(isManager []admissionregistrationv1.MatchCondition) []client.Object {
	labels := "(has(object.metadata.labels) ? object.metadata.labels : {})"
	return denyingPolicy(wire.ManagerNamespacePolicyName, createsAndUpdates("", "v1", "namespaces"), isManager,
		[]admissionregistrationv1.Validation{{
			Expression: "'" + wire.TenantNamespaceLabel + "' in " + labels + " && " + labels + "['" + wire.TenantNamespaceLabel + "'] == 'true' && '" + wire.RemoteClusterIDLabel + "' in " + labels + " && " +
				"object.metadata.name == '" + wire.TenantNamespacePrefix + "' + " + labels + "['" + wire.RemoteClusterIDLabel + "']",
			Message: "liqo-auth-manager creates no namespace but liqo-tenant-<id>, labelled as the tenant namespace of <id>",
		}})
}
