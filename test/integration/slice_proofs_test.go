package integration

// A slice's failed proof does not stop the removal of the rest (helper-36's F2 on
// c244b87): unauthenticate and leave delete every slice and then the control plane's
// access, each with its proof, and fail at the end naming the slice whose proof failed.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// slicesWithOneKept peers c with p, has slices kept and other accepted, and acts as an
// administrator of c's tenant namespace on p short of cluster-admin (roles and
// rolebindings create, resourceslices get): it binds the identity of slice kept to read
// that slice, so that its revocation cannot be verified. It returns other's kubeconfig.
func slicesWithOneKept(t *testing.T, c, p *site, kept, other string) []byte {
	t.Helper()
	ctx := context.Background()
	a67Slice(t, c, p, kept)
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, other, "", "1")))
	kc := sliceKubeconfig(t, c, p, other)
	tn := wire.TenantNamespaceName(c.id)
	admin := principal(t, p, "tenant-namespace-admin", tn,
		rule(rbacv1.GroupName, "roles", "create"), rule(rbacv1.GroupName, "rolebindings", "create"),
		rule(authv1beta1.GroupVersion.Group, "resourceslices", "get"))
	require.NoError(t, admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "keeps-" + kept},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{authv1beta1.GroupVersion.Group}, Resources: []string{"resourceslices"}, ResourceNames: []string{kept}, Verbs: []string{"get"}}}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "keeps-" + kept},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: authn.SliceUserName(kept, c.id)}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "keeps-" + kept}}))
	return kc
}

// assertAllRemovedButOneProof: the command failed naming kept's access, other is gone on
// both sides with its access, and so is the control plane's (its Tenant on p, its
// Identity on c).
func assertAllRemovedButOneProof(t *testing.T, c, p *site, kept, other string, otherKC []byte, errOut string, err error) {
	t.Helper()
	ctx := context.Background()
	t.Logf("err=%v\n%s", err, errOut)
	if assert.Error(t, err, "the access of slice %s stays, bound by another principal: the command must not succeed", kept) {
		assert.Contains(t, err.Error(), "access not revoked")
		assert.Contains(t, err.Error(), "ResourceSlice "+kept)
	}
	for _, name := range []string{kept, other} {
		getErr := c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: name}, &authv1beta1.ResourceSlice{})
		assert.True(t, apierrors.IsNotFound(getErr), "slice %s is deleted on the consumer (got %v)", name, getErr)
	}
	err = p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: other}, &authv1beta1.ResourceSlice{})
	assert.True(t, apierrors.IsNotFound(err), "the copy of slice %s is deleted on the provider (got %v)", other, err)
	assert.False(t, a67SliceStillReadsItsCopy(t, c, otherKC, other), "the identity of slice %s lost its access", other)
	err = p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "the consumer's Tenant is deleted on the provider after the slice's failed proof (got %v)", err)
	err = c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
	assert.True(t, apierrors.IsNotFound(err), "the control-plane Identity is removed on the consumer (got %v)", err)
}

// TestUnauthenticateGoesOnPastASlicesFailedProof: unauthenticate --delete-resourceslices,
// both kubeconfigs, the first slice's access kept by a binding of the provider's tenant
// namespace administrator.
func TestUnauthenticateGoesOnPastASlicesFailedProof(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := slicesWithOneKept(t, c, p, "slice-f2a", "slice-f2b")
	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices")
	assertAllRemovedButOneProof(t, c, p, "slice-f2a", "slice-f2b", kc, errOut, err)
	assert.Contains(t, errOut, "Access revoked: verified", "the control plane's revocation is proven")
}

// TestLeaveGoesOnPastASlicesFailedProof: the same with unauthenticate --leave.
func TestLeaveGoesOnPastASlicesFailedProof(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := slicesWithOneKept(t, c, p, "slice-f2c", "slice-f2d")
	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--delete-resourceslices")
	assertAllRemovedButOneProof(t, c, p, "slice-f2c", "slice-f2d", kc, errOut, err)
	assert.Contains(t, errOut, "revoked: verified with this cluster's own certificate", "the control plane's revocation is proven")
}
