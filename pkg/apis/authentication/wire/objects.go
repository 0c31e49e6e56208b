package wire

import "strings"

// Names of the objects this implementation makes (and of Liqo's that it finds or
// removes), and of its field managers: one home, so that a policy, a role and the
// controller that writes the object cannot disagree on a name.
const (
	// ManagerName names the manager's ServiceAccount, ClusterRole, leader-election Lease
	// (in the Liqo namespace), event reporter and field manager.
	ManagerName = "liqo-auth-manager"
	// ManagerTenantRoleName is the ClusterRole that liqo-auth-manager holds in each tenant
	// namespace (through the RoleBinding ManagerName there), and nowhere else.
	ManagerTenantRoleName = ManagerName + "-tenant"

	// CreatorPolicyName names the admission policies (and their bindings) that record the
	// creator of tenant namespaces.
	CreatorPolicyName = "liqo-auth-namespace-creator"
	// ManagerPolicyName is the ValidatingAdmissionPolicy (and its binding) that bounds what
	// liqo-auth-manager's ServiceAccount may do with CertificateSigningRequests,
	// ManagerBindingPolicyName the one that bounds the RoleBindings it writes, and
	// ManagerTenantPolicyName the one that lets it write bindings, Roles and Leases only in
	// a namespace where it is bound as a tenant namespace's manager.
	ManagerPolicyName        = "liqo-auth-manager-csrs"
	ManagerBindingPolicyName = "liqo-auth-manager-bindings"
	ManagerTenantPolicyName  = "liqo-auth-manager-tenant-writes"
	// ManagerNamespacePolicyName is the ValidatingAdmissionPolicy (and its binding) that
	// lets liqo-auth-manager create no namespace but a tenant namespace (a Peering's).
	ManagerNamespacePolicyName = "liqo-auth-manager-namespaces"
	// PeeringUserPolicyName is the ValidatingAdmissionPolicy (and its binding) that lets a
	// peering user create no Secret but the nonce.
	PeeringUserPolicyName = "liqo-auth-peering-users"
	// PeeringUserDeletesPolicyName is the ValidatingAdmissionPolicy (and its binding) that
	// lets a peering user delete Roles and RoleBindings only in its consumer's tenant
	// namespace and the Liqo namespace.
	PeeringUserDeletesPolicyName = "liqo-auth-peering-user-deletes"

	// PeeringsCRDName is the CustomResourceDefinition of Peerings.
	PeeringsCRDName = "peerings.authentication.liqo.io"

	// ConfigMapName is the ConfigMap where liqoctl install records how this cluster
	// presents itself to consumers.
	ConfigMapName = "liqo-auth-config"

	// FieldOwner is the field manager liqoctl applies with.
	FieldOwner = "liqoctl"
	// TenantStateFieldOwner is the field manager of the administrator's tenantCondition:
	// another than the one the consumer's side applies the Tenant with, so that a consumer
	// re-running authenticate never takes the administrator's decision back.
	TenantStateFieldOwner = "liqoctl-tenant-state"
	// ApprovalFieldOwner is the field manager of the approval setting of ConfigMapName
	// (liqoctl install --require-approval): another than FieldOwner, so that an install
	// that sets other options keeps it, and one that sets it keeps them.
	ApprovalFieldOwner = "liqoctl-require-approval"

	// PeeringUserPrefix starts every peering user name: liqo-peer-user-<consumer>-<random>.
	PeeringUserPrefix = "liqo-peer-user-"
	// PeeringUserObjectName starts the name of every object of a peering user
	// (PeeringUserClusterObjectName). Older releases named the Roles and RoleBindings of
	// every consumer's peering user with it alone, so that a second consumer's overwrote
	// the first's; objects of that name are still found and removed by their labels.
	PeeringUserObjectName = "liqo-peering-user"
)

// PeeringUserName is the user name of a new peering user of consumerID: unique per
// issuance (suffix), so that a later peering user never revives an old certificate.
func PeeringUserName(consumerID, suffix string) string {
	return PeeringUserPrefix + consumerID + "-" + suffix
}

// PeeringUserConsumer is the consumer a peering user (PeeringUserName) was issued for:
// the inverse of PeeringUserName.
func PeeringUserConsumer(user string) string {
	id := strings.TrimPrefix(user, PeeringUserPrefix)
	if i := strings.LastIndex(id, "-"); i > 0 {
		id = id[:i]
	}
	return id
}

// PeeringUserClusterObjectName names every object of the peering user of consumerID: its
// ClusterRole and ClusterRoleBinding, and its Roles and RoleBindings in its tenant
// namespace and in the Liqo namespace, liqo-peering-user-<consumer>. Its right to delete
// them (retiring itself) is granted by these names only.
func PeeringUserClusterObjectName(consumerID string) string {
	return PeeringUserObjectName + "-" + consumerID
}

// SliceIdentityName is the consumer's Identity of ResourceSlice slice.
func SliceIdentityName(slice string) string { return "resourceslice-" + slice }

// SliceAccessName names the Role and RoleBinding of a slice's identity on the provider.
func SliceAccessName(slice string) string { return "liqo-resourceslice-" + slice }

// Names of Liqo's objects that this implementation finds (to bind or to tell apart) or
// removes (unauthenticate against a provider running Liqo's controllers).
const (
	// LiqoControllerManagerName is the Deployment of Liqo's controllers, in the Liqo
	// namespace, as Liqo's chart names it.
	LiqoControllerManagerName = "liqo-controller-manager"
	// AppNameLabel is the label Liqo's chart names its components with (the same key as
	// ClusterIDLabelKey).
	AppNameLabel = "app.kubernetes.io/name"
	// ControlPlaneRoleAppName is the AppNameLabel value of liqo-remote-controlplane.
	ControlPlaneRoleAppName = "remote-controlplane"
	// ClusterWideRoleName is the ClusterRole Liqo binds cluster-wide to the identities
	// of a consumer's virtual kubelets (group <C>).
	ClusterWideRoleName = "liqo-virtual-kubelet-remote-clusterwide"
	// ClusterWideRoleAppName is its AppNameLabel value.
	ClusterWideRoleAppName = "virtual-kubelet-remote-clusterwide"
	// LiqoControlPlaneBindingName is Liqo's RoleBinding of liqo-remote-controlplane in a
	// tenant namespace.
	LiqoControlPlaneBindingName = "liqo-binding-" + ControlPlaneRoleName
	// LiqoRemoteCertificateSecret is where Liqo's provider keeps the certificate it issued.
	LiqoRemoteCertificateSecret = "liqo-remote-certificate"
)

// LiqoClusterWideBindingName is Liqo's ClusterRoleBinding of
// liqo-virtual-kubelet-remote-clusterwide for consumer clusterID.
func LiqoClusterWideBindingName(clusterID string) string {
	return "liqo-binding-" + ClusterWideRoleName + "-" + clusterID
}
