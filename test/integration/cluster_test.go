package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

func TestClusterIdentityAndTenantNamespaces(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "cluster-pkg")[0]
	c := newClient(t, cp.Config)
	ctx := context.Background()
	ns := wire.DefaultLiqoNamespace
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	_, err := cluster.GetClusterID(ctx, c, ns)
	require.ErrorIs(t, err, cluster.ErrNotInstalled)
	_, _, err = cluster.EnsureClusterID(ctx, c, ns, "Not_Valid")
	require.Error(t, err)
	id, created, err := cluster.EnsureClusterID(ctx, c, ns, "")
	require.NoError(t, err)
	assert.True(t, created)
	require.NoError(t, cluster.ValidateClusterID(id), "a random ID is a valid one")
	again, created, err := cluster.EnsureClusterID(ctx, c, ns, "")
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, id, again, "the cluster ID never changes")
	_, _, err = cluster.EnsureClusterID(ctx, c, ns, "another")
	require.ErrorContains(t, err, "never changes")

	key, created, err := cluster.EnsureClusterKey(ctx, c, ns, authn.RSA2048)
	require.NoError(t, err)
	assert.True(t, created)
	same, created, err := cluster.EnsureClusterKey(ctx, c, ns, authn.Ed25519)
	require.NoError(t, err)
	assert.False(t, created)
	assert.True(t, authn.PublicKeysEqual(key.Public(), same.Public()), "an existing key is never replaced")
	var keys corev1.Secret
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &keys))
	keys.Data[wire.PublicKeyField] = []byte("tampered")
	require.NoError(t, c.Update(ctx, &keys))
	_, err = cluster.GetClusterKey(ctx, c, ns)
	require.ErrorContains(t, err, "does not match", "a broken key pair is reported, not regenerated")

	const liqoNS = wire.DefaultLiqoNamespace
	first, err := cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-remote", false)
	require.NoError(t, err)
	tn := first.Name
	assert.Equal(t, "liqo-tenant-cl-remote", tn)
	assert.False(t, first.Adopted, "a namespace it creates is not adopted")
	assert.True(t, first.Created, "a namespace it creates says so")
	second, err := cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-remote", false)
	require.NoError(t, err)
	assert.Equal(t, tn, second.Name)
	assert.False(t, second.Adopted)
	assert.False(t, second.Created, "a namespace kept was not created now")
	ok, _, err := cluster.VerifyTenantNamespace(ctx, c, liqoNS, tn, "cl-remote")
	require.NoError(t, err)
	assert.True(t, ok, "the namespace is recorded")
	var binding rbacv1.RoleBinding
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.ManagerName}, &binding), "the manager is bound in the tenant namespace")
	assert.Equal(t, wire.ManagerTenantRoleName, binding.RoleRef.Name)
	// A namespace of that name that this cluster did not record is adopted only when the
	// administrator says so (and is labelled then); one labelled for another cluster is
	// refused even so.
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-bare"}}))
	_, err = cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-bare", false)
	require.ErrorIs(t, err, cluster.ErrUnrecordedNamespace)
	require.ErrorContains(t, err, "--adopt-tenant-namespace")
	got, err := cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-bare", true)
	require.NoError(t, err)
	assert.Equal(t, "liqo-tenant-cl-bare", got.Name)
	assert.True(t, got.Adopted, "a namespace that existed is adopted")
	assert.False(t, got.Created, "an adopted namespace may hold anything")
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-taken", Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-other"}}}))
	_, err = cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-taken", true)
	require.ErrorContains(t, err, "tenant namespace of cluster \"cl-other\"")
	// A look-alike, labelled by someone who may create namespaces, is not a tenant
	// namespace: only the recorded one is.
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "look-alike", Labels: cluster.TenantNamespaceLabels("cl-remote")}}))
	ok, why, err := cluster.VerifyTenantNamespace(ctx, c, liqoNS, "look-alike", "cl-remote")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Contains(t, why, "is not the tenant namespace of cluster")
	second, err = cluster.EnsureTenantNamespace(ctx, c, liqoNS, "cl-remote", false)
	require.NoError(t, err)
	assert.Equal(t, tn, second.Name, "the record, not the labels, names the tenant namespace")

	// A user who may not list namespaces finds its tenant namespace by name.
	admin := c
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ns-getter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ns-getter"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ns-getter"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "getter"}}}))
	cfg, err := cp.UserConfig("getter")
	require.NoError(t, err)
	getter := newClient(t, cfg)
	eventually(t, 10e9, "the getter finds the namespace by name", func(ctx context.Context) (bool, error) {
		got, getTenantNamespaceErr := cluster.GetTenantNamespace(ctx, getter, liqoNS, "cl-remote")
		return got == tn, getTenantNamespaceErr
	})
	_, err = cluster.GetTenantNamespace(ctx, getter, liqoNS, "cl-absent")
	require.ErrorIs(t, err, cluster.ErrTenantNamespaceNotFound)
}

func TestCRDsServeBothVersionsAndEnforceRules(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "crds")[0]
	s := installSites(t, []*testenv.ControlPlane{cp}, "cl-crds")[0]
	c := s.client
	ctx := context.Background()

	// v1alpha1 is served with the same schema and stored as v1beta1.
	alpha := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.liqo.io/v1alpha1", "kind": "Tenant",
		"metadata": map[string]any{"name": "cl-x", "namespace": "default"},
		"spec":     map[string]any{"clusterID": "cl-x", "signature": "AAAA"},
	}}
	require.NoError(t, c.Create(ctx, alpha))
	var beta authv1beta1.Tenant
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "cl-x"}, &beta))
	assert.Equal(t, authv1beta1.TenantConditionActive, beta.Spec.TenantCondition, "defaulted")
	assert.Equal(t, authv1beta1.KeysExchange, *beta.Spec.AuthzPolicy, "defaulted")

	reject := func(what string, err error, msg string) {
		t.Helper()
		require.Error(t, err, what)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", what, err)
		assert.Contains(t, err.Error(), msg, what)
	}
	upd := beta.DeepCopy()
	upd.Spec.ClusterID = "cl-y"
	reject("changing a Tenant's clusterID", c.Update(ctx, upd), "clusterID is immutable")
	upd = beta.DeepCopy()
	upd.Spec.TenantCondition = "Paused"
	reject("an unknown tenantCondition", c.Update(ctx, upd), "Unsupported value")
	bad := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: authv1beta1.TenantSpec{ClusterID: "Not_A_Label"}}
	reject("an invalid cluster ID", c.Create(ctx, bad), "spec.clusterID")
	bad = &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "long", Namespace: "default"}, Spec: authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(strings.Repeat("a", 52))}}
	reject("a 52-character cluster ID", c.Create(ctx, bad), "spec.clusterID")
	bad = &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: "default"}, Spec: authv1beta1.TenantSpec{ClusterID: "huge", CSR: make([]byte, 64<<10)}}
	reject("a CSR beyond the API bound", c.Create(ctx, bad), "spec.csr")

	id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Name: "controlplane-cl-p", Namespace: "default"},
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-p", Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To("x")}}
	require.NoError(t, c.Create(ctx, id))
	upd2 := id.DeepCopy()
	upd2.Spec.Type = authv1beta1.ResourceSliceIdentityType
	reject("changing an Identity's type", c.Update(ctx, upd2), "type is immutable")
	upd2 = id.DeepCopy()
	upd2.Spec.ClusterID = "cl-q"
	reject("changing an Identity's clusterID", c.Update(ctx, upd2), "clusterID is immutable")
	bad2 := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}, Spec: authv1beta1.IdentitySpec{Type: "Admin"}}
	reject("an unknown identity type", c.Create(ctx, bad2), "Unsupported value")

	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default"}, Spec: authv1beta1.ResourceSliceSpec{Class: "default"}}
	require.NoError(t, c.Create(ctx, rs))
	rs.Spec.Class = "gold"
	reject("changing a ResourceSlice class", c.Update(ctx, rs), "class is immutable")
}
