package access

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// ManagerUser is the user name of liqo-auth-manager's ServiceAccount in Liqo namespace ns.
func ManagerUser(ns string) string { return "system:serviceaccount:" + ns + ":" + wire.ManagerName }

// ForgeManagerPolicy is the ValidatingAdmissionPolicy, and its binding, for the manager's
// ServiceAccount in Liqo namespace ns. RBAC lets it approve any request for the client
// signer kubernetes.io/kube-apiserver-client, that is, have a certificate issued for any
// user name but those the signer refuses (system:masters): RBAC cannot scope approval to
// a requester or a label. The API server, with this policy, lets it approve only a
// request it made itself, labelled as this project's and naming a Tenant or slice, for
// that signer with an explicit lifetime; and create only such requests, with the usages
// of a client certificate. A manager confused into approving someone else's request is
// refused; one that is compromised still chooses the user name of its own requests (CEL
// cannot read the request's subject), as docs/security.md says.
func ForgeManagerPolicy(ns string) []client.Object {
	ours := "has(object.metadata.labels) && object.metadata.labels['" + wire.ManagedByLabel + "'] == '" + wire.ManagedByValue + "' && '" + wire.TenantUIDLabel + "' in object.metadata.labels"
	return append(denyingPolicy(wire.ManagerPolicyName,
		createsAndUpdates(certificatesv1.GroupName, "*", "certificatesigningrequests", "certificatesigningrequests/approval"),
		[]admissionregistrationv1.MatchCondition{{
			Name: "liqo-auth-manager", Expression: "request.userInfo.username == '" + ManagerUser(ns) + "'",
		}},
		[]admissionregistrationv1.Validation{
			{Expression: "object.spec.signerName == '" + certificatesv1.KubeAPIServerClientSignerName + "'",
				Message: "liqo-auth-manager handles requests for the signer " + certificatesv1.KubeAPIServerClientSignerName + " only"},
			{Expression: ours,
				Message: "liqo-auth-manager handles only requests labelled " + wire.ManagedByLabel + "=" + wire.ManagedByValue + " with a " + wire.TenantUIDLabel},
			{Expression: "request.subResource != 'approval' || object.spec.username == request.userInfo.username",
				Message: "liqo-auth-manager approves only the requests it made itself"},
			{Expression: "has(object.spec.expirationSeconds)",
				Message: "liqo-auth-manager's requests carry an explicit lifetime"},
			{Expression: "has(object.spec.usages) && object.spec.usages.all(u, u in ['digital signature', 'key encipherment', 'client auth'])",
				Message: "liqo-auth-manager's requests are for client certificates only"},
		}), forgeManagerTenantPolicies(ns)...)
}
