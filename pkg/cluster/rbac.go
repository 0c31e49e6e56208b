package cluster

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagerName names the manager's ServiceAccount, ClusterRole, leader-election Lease and
// field manager.
const ManagerName = "liqo-auth-manager"

func managedLabels() map[string]string { return map[string]string{ManagedByLabel: ManagedByValue} }

// ControlPlaneRules are the permissions of a consumer's control-plane identity, granted
// only inside its tenant namespace: the Liqo resources it negotiates with. No Secrets,
// nothing cluster-wide, and status is read-only.
func ControlPlaneRules() []rbacv1.PolicyRule {
	crud := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"resourceslices"}, Verbs: crud},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"resourceslices/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespaceoffloadings"}, Verbs: crud},
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespaceoffloadings/status"}, Verbs: []string{"get"}},
	}
}

// ForgeControlPlaneClusterRole is the liqo-remote-controlplane ClusterRole. It is only
// ever bound with RoleBindings in tenant namespaces.
func ForgeControlPlaneClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneRoleName, Labels: managedLabels()},
		Rules:      ControlPlaneRules(),
	}
}

// TenantReaderRules let a consumer read and watch exactly its own Tenant, to pick up
// renewed certificates.
func TenantReaderRules(tenantName string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"},
		ResourceNames: []string{tenantName}, Verbs: []string{"get", "list", "watch"}}}
}

// ManagerRules are the permissions of liqo-auth-manager: exactly what its controllers use.
func ManagerRules() []rbacv1.PolicyRule {
	rw := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: rw},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants", "identities"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants/status", "identities/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants/finalizers", "identities/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch", "create", "delete", "deletecollection"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-client"}, Verbs: []string{"approve"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings", "roles"}, Verbs: rw},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{ControlPlaneRoleName}, Verbs: []string{"bind"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	}
}

// ForgeManagerClusterRole is the ClusterRole of liqo-auth-manager.
func ForgeManagerClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ManagerName, Labels: managedLabels()},
		Rules:      ManagerRules(),
	}
}
