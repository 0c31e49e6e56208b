package access

import (
	"strings"

	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// ControlPlaneRules are the permissions of a consumer's control-plane identity, granted
// only inside its tenant namespace: the resources Liqo's control plane replicates into a
// provider (ResourceSlices, NamespaceMaps, Renews), as Liqo's liqo-remote-controlplane
// grants them. No Secrets, nothing cluster-wide. Status is read-only: the provider's own
// controllers write it, and Liqo's replicator only copies it back to the consumer.
func ControlPlaneRules() []rbacv1.PolicyRule {
	crud := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"resourceslices", "renews"}, Verbs: crud},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"resourceslices/status", "renews/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps"}, Verbs: crud},
		{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps/status"}, Verbs: []string{"get"}},
	}
}

// ForgeControlPlaneClusterRole is the liqo-remote-controlplane ClusterRole, labelled as
// Liqo's (Liqo's manager finds it by that label). This project only ever binds it with
// RoleBindings in tenant namespaces.
func ForgeControlPlaneClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   rbacType("ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{Name: wire.ControlPlaneRoleName, Labels: managedWith(wire.AppNameLabel, wire.ControlPlaneRoleAppName)},
		Rules:      ControlPlaneRules(),
	}
}

// ClusterWideRules are the cluster-wide permissions of Liqo's
// liqo-virtual-kubelet-remote-clusterwide: what a consumer's virtual kubelet reads about
// the provider's nodes and devices.
func ClusterWideRules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: read},
		{APIGroups: []string{"metrics.liqo.io"}, Resources: []string{"scrape/metrics"}, Verbs: read},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"deviceclasses"}, Verbs: []string{"create", "get", "list", "watch"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: read},
	}
}

// ForgeClusterWideRole is liqo-virtual-kubelet-remote-clusterwide, created as Liqo
// creates it, so that a Liqo component running against this provider finds it. This
// project binds it to nobody: a control-plane identity gets nothing cluster-wide.
func ForgeClusterWideRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   rbacType("ClusterRole"),
		ObjectMeta: metav1.ObjectMeta{Name: wire.ClusterWideRoleName, Labels: managedWith(wire.AppNameLabel, wire.ClusterWideRoleAppName)},
		Rules:      ClusterWideRules(),
	}
}

// TenantReaderRules let a consumer read and watch exactly its own Tenant, to pick up
// renewed certificates, and delete it, to leave (handshake.Leave: a consumer leaving is its
// own right, and deleting its Tenant only takes its own access away); and renew (never
// create nor delete) its presence Lease, which the provider's manager creates when it
// collects consumers that are gone. They are bound to the consumer's own user only: no
// slice identity and no other tenant holds them.
func TenantReaderRules(tenantName string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, ResourceNames: []string{tenantName}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{wire.PresenceLeaseName}, Verbs: []string{"get", "update", "patch"}},
	}
}

// ManagerRules are the cluster-wide permissions of liqo-auth-manager: reading what its
// controllers watch, the CertificateSigningRequests it creates and approves, and the
// reviews it asks. It writes no Secret, Role, RoleBinding or Lease with them: those writes
// are granted only in the Liqo namespace (ManagerNamespaceRules) and in tenant namespaces
// (ManagerTenantRules).
func ManagerRules() []rbacv1.PolicyRule {
	write := []string{"update", "patch"}
	return append(watchRules(false), []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants", "identities", "resourceslices"}, Verbs: write},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants/status", "identities/status", "resourceslices/status", "renews/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants/finalizers", "identities/finalizers", "resourceslices/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-client"}, Verbs: []string{"approve"}},
		// Binding itself in a tenant namespace an administrator created with another tool
		// (Liqo's liqoctl): the admission policy liqo-auth-manager-bindings lets it create
		// RoleBindings only in tenant namespaces, and its own binding only in one whose
		// creator may make tenant records.
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{wire.ControlPlaneRoleName, wire.ManagerTenantRoleName}, Verbs: []string{"bind"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
		// Its metrics endpoint in a Pod (--metrics-secure) authenticates each scraper with a
		// TokenReview and asks a SubjectAccessReview whether it may get /metrics.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		// A declared peering (a Peering) makes the consumer's tenant namespace of its
		// provider, as liqoctl authenticate does: the admission policy
		// liqo-auth-manager-namespaces lets it create only tenant namespaces.
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
		// A manager started before the Peering CRD was installed watches that CRD alone,
		// and restarts once it is.
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{wire.PeeringsCRDName}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}...)
}

// ManagerNamespaceRules are liqo-auth-manager's permissions in the Liqo namespace: its
// Lease, the ConfigMaps it reads (cluster ID, configuration) and completes (the cluster ID
// a manifest left empty; tenant records: pinned CAs, issued certificates), and filling the
// cluster key Secret a manifest left empty. The only ConfigMaps it creates are tenant
// records of namespaces designated by a principal who may create them itself.
func ManagerNamespaceRules() []rbacv1.PolicyRule {
	return append(watchRules(true), []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{wire.KeysSecretName}, Verbs: []string{"update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		// Carrying out the Peerings declared here: their finalizer and status.
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"peerings"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"peerings/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"peerings/finalizers"}, Verbs: []string{"update"}},
	}...)
}

// ManagerTenantRules are liqo-auth-manager's permissions in a tenant namespace: the
// Secrets of the protocol (nonces, signed nonces, kubeconfigs) and the tenant's Role and
// RoleBindings.
func ManagerTenantRules() []rbacv1.PolicyRule {
	write := []string{"create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: write},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: write},
		// Binding and writing the Roles it makes here (a tenant's reader, a slice's
		// access): without bind and escalate, the API server checks that the manager holds
		// every rule of the Role it binds or writes, with a consistent read of all its
		// bindings that waits for its cache (4 to 45 ms per Role on a provider, the
		// longest write of a handshake). Only here, and the admission policy
		// liqo-auth-manager-tenant-writes lets it write no Role but the tenant's reader and
		// slices' Roles with exactly their rules, and bind no other (TestManagerBindingsAreExact).
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, Verbs: []string{"bind", "escalate"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"identities", "resourceslices"}, Verbs: []string{"create", "delete"}},
		// Collecting a consumer that is gone (--peer-gone-after): its presence Lease, which
		// it adopts and renews, and its Tenant.
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{wire.PresenceLeaseName}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, Verbs: []string{"delete"}},
	}
}

// ForgeManagerClusterRoles are the ClusterRoles of liqo-auth-manager: the cluster-wide one
// and the one bound in each tenant namespace.
func ForgeManagerClusterRoles() []client.Object {
	return []client.Object{
		&rbacv1.ClusterRole{TypeMeta: rbacType("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Labels: wire.ManagedLabels()}, Rules: ManagerRules()},
		&rbacv1.ClusterRole{TypeMeta: rbacType("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerTenantRoleName, Labels: wire.ManagedLabels()}, Rules: ManagerTenantRules()},
	}
}

// ForgeManagerIdentity is the ServiceAccount liqo-auth-manager runs as, in the cluster or
// beside it (with a token: kubectl create token liqo-auth-manager -n <liqo namespace>),
// with its ClusterRoleBinding and its Role and RoleBinding in the Liqo namespace.
func ForgeManagerIdentity(liqoNS string) []client.Object {
	meta := metav1.ObjectMeta{Name: wire.ManagerName, Namespace: liqoNS, Labels: wire.ManagedLabels()}
	subjects := []rbacv1.Subject{ManagerSubject(liqoNS)}
	return []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta},
		&rbacv1.ClusterRoleBinding{TypeMeta: rbacType("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Labels: wire.ManagedLabels()},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerName}, Subjects: subjects},
		&rbacv1.Role{TypeMeta: rbacType("Role"), ObjectMeta: meta, Rules: ManagerNamespaceRules()},
		&rbacv1.RoleBinding{TypeMeta: rbacType("RoleBinding"), ObjectMeta: meta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.ManagerName}, Subjects: subjects},
	}
}

// ManagerSubject is liqo-auth-manager's ServiceAccount as an RBAC subject.
func ManagerSubject(liqoNS string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: wire.ManagerName, Namespace: liqoNS}
}

// ForgeManagerTenantBinding is the RoleBinding, in tenant namespace ns, of the manager's
// per-tenant ClusterRole.
func ForgeManagerTenantBinding(liqoNS, ns string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   rbacType("RoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Namespace: ns, Labels: wire.ManagedLabels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName},
		Subjects:   []rbacv1.Subject{ManagerSubject(liqoNS)},
	}
}

func rbacType(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// TenantRules are all the permissions a Tenant's user holds in its tenant namespace: the
// control-plane role and the right to read its own Tenant.
func TenantRules(tenantName string) []rbacv1.PolicyRule {
	return append(ControlPlaneRules(), TenantReaderRules(tenantName)...)
}

// IdentitySubjects are the subjects a provider binds for an identity of user whose
// accepted request carries organizations (its CSR's Subject.Organization, validated): the
// one place the subject of an identity is decided. A key-bound identity (its second
// Organization is the key group wire.KeyGroupPrefix+user+":"+fingerprint) is bound as
// Group <key group>, so that a certificate of the same user for any other key authorizes
// nothing; any other (Liqo's form, O=[liqo.io]) as User <user>.
func IdentitySubjects(user string, organizations []string) []rbacv1.Subject {
	if g := KeyGroupIn(user, organizations); g != "" {
		return []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: g}}
	}
	return []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
}

// KeyGroupIn is the key group of user among organizations ("" when there is none).
func KeyGroupIn(user string, organizations []string) string {
	for _, o := range organizations {
		if strings.HasPrefix(o, wire.KeyGroupPrefix+user+":") {
			return o
		}
	}
	return ""
}

// AccessObjects are the Role and RoleBindings that give consumer clusterID its access in
// tenant namespace ns, bound to subjects (IdentitySubjects; during a key rotation, the old
// identity's subject too). The provider creates them; unauthenticate removes them by these
// names (subjects may then be nil).
func AccessObjects(ns, clusterID string, subjects []rbacv1.Subject) []client.Object {
	labels := map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: clusterID}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	return []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: meta(wire.ControlPlaneBindingName), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ControlPlaneRoleName}},
		&rbacv1.Role{ObjectMeta: meta(wire.TenantReaderName), Rules: TenantReaderRules(clusterID)},
		&rbacv1.RoleBinding{ObjectMeta: meta(wire.TenantReaderName), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.TenantReaderName}},
	}
}

// LiqoAccessObjects are the objects by which a Liqo provider grants consumer clusterID
// its access (tenant namespace ns), and the certificate it keeps for it.
func LiqoAccessObjects(ns, clusterID string) []client.Object {
	return []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.LiqoControlPlaneBindingName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.LiqoClusterWideBindingName(clusterID)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.LiqoRemoteCertificateSecret}},
	}
}

// RevocationRules are every permission a consumer's identities may have been granted on
// a provider, by this project or by Liqo: what unauthenticate proves revoked.
func RevocationRules(clusterID string) []rbacv1.PolicyRule {
	return append(TenantRules(clusterID), ClusterWideRules()...)
}

// SliceConsumer says whether rs is a provider's copy of a consumer's slice (the consumer
// labels what it writes into a provider as replicated) and which consumer it says it is
// from: its spec, or else its label.
func SliceConsumer(rs *authv1beta1.ResourceSlice) (consumer string, providerCopy bool) {
	consumer = rs.Labels[wire.RemoteClusterIDLabel]
	if rs.Spec.ConsumerClusterID != nil {
		consumer = string(*rs.Spec.ConsumerClusterID)
	}
	return consumer, rs.Labels[wire.ReplicationStatusLabel] == "true"
}

// SliceRules are the permissions of a slice's identity in the provider's tenant
// namespace: reading its own ResourceSlice, nothing else. The virtual-kubelet role
// (ClusterRole liqo-virtual-kubelet-remote in Liqo) belongs to the namespaces offloaded to
// the consumer, which the offloading step binds; no Secret, no workload is writable in
// the tenant namespace, where a Secret write could mint a ServiceAccount token.
func SliceRules(slice string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"resourceslices"},
		ResourceNames: []string{slice}, Verbs: []string{"get", "list", "watch"}}}
}

// SliceAccessObjects are the Role and RoleBinding that give the identity of slice (bound
// as subject, SliceSubject) its access in tenant namespace ns of consumer clusterID; the
// Role records the resources granted.
func SliceAccessObjects(ns, slice string, subject rbacv1.Subject, clusterID string, granted corev1.ResourceList) []client.Object {
	labels := map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: clusterID, wire.SliceNameLabel: slice}
	meta := metav1.ObjectMeta{Name: wire.SliceAccessName(slice), Namespace: ns, Labels: labels}
	if granted == nil {
		granted = corev1.ResourceList{}
	}
	b, _ := json.Marshal(granted) // a ResourceList always marshals
	role := &rbacv1.Role{ObjectMeta: *meta.DeepCopy(), Rules: SliceRules(slice)}
	role.Annotations = map[string]string{wire.GrantedResourcesAnnotation: string(b)}
	return []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: meta, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.SliceAccessName(slice)}},
	}
}

// SliceGrant reads the resources a slice's Role records as granted.
func SliceGrant(role *rbacv1.Role) (corev1.ResourceList, bool) {
	v, ok := role.Annotations[wire.GrantedResourcesAnnotation]
	if !ok {
		return nil, false
	}
	var l corev1.ResourceList
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return nil, false
	}
	return l, true
}

// managedWith is the labels of an object this project makes, and k=v.
func managedWith(k, v string) map[string]string {
	l := wire.ManagedLabels()
	l[k] = v
	return l
}
