package integration

// Attack 68 (helper-34 on a69d8bb): a slice's deletion proved its revocation with the
// certificate of the slice's Identity alone, read by handshake.DeleteSlices from that
// Identity (an Identity writer's object) before the deletion. No Identity (or none with a
// certificate) was "The slice had no identity: nothing to revoke", and the command
// succeeded while the slice's copy kept its grant on the provider. Nor did any proof check
// that the certificate it took was of the identity it proves for: every certificate of
// this cluster (the control plane's, each slice's) has its key and the pinned CA.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestAttack68IdentityWriterDeletesBothIdentitiesBeforeASlicesDeletion acts as an Identity
// writer of the consumer's tenant namespace (identities get, delete). It deletes the
// control-plane Identity (the slice controller can no longer reach the provider, lets the
// local slice go, and no longer rewrites the slice's Identity: ensureIdentity runs after
// providerClient) and the slice's Identity. The administrator then runs liqoctl delete
// resourceslice. What must hold: either the command fails, or the slice identity lost its
// access on the provider. The slice's status still holds its certificate: the proof takes
// it, finds the copy's grant and names where to remove it.
func TestAttack68IdentityWriterDeletesBothIdentitiesBeforeASlicesDeletion(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kc := a67Slice(t, c, p, "slice-a68")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "delete"))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(p.id)}}))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.SliceIdentityName("slice-a68")}}))

	_, errOut, err := runCLI(t, "delete", "resourceslice", "slice-a68", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, kc, "slice-a68", errOut, err)
	assert.NotContains(t, errOut, "nothing to revoke")
}

// TestAttack68IdentityWriterPutsTheControlPlaneCertificateInTheSlicesIdentity acts as an
// Identity writer of the consumer's tenant namespace (identities get, update, delete). It
// deletes the control-plane Identity (so that no controller writes the slice's Identity
// again) after copying its certificate, of this cluster's key and the pinned CA, into the
// slice's Identity. What must hold: the proof is never made with a certificate of another
// user than the slice's; it says so, takes the slice's status, and the command fails or
// the access is gone.
func TestAttack68IdentityWriterPutsTheControlPlaneCertificateInTheSlicesIdentity(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kc := a67Slice(t, c, p, "slice-a68b")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update", "delete"))
	var cp, sl authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &cp))
	require.NoError(t, writer.Delete(ctx, &cp))
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName("slice-a68b")}, &sl))
	sl.Spec.AuthParams.SignedCRT = cp.Spec.AuthParams.SignedCRT
	require.NoError(t, writer.Update(ctx, &sl))

	_, errOut, err := runCLI(t, "delete", "resourceslice", "slice-a68b", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, kc, "slice-a68b", errOut, err)
	assert.Contains(t, errOut, `holds a certificate for user "`+c.id+`"`, "the certificate of another user is said and passed over")
}

// TestAttack68IdentityWriterPutsASlicesCertificateInTheControlPlaneIdentity acts as an
// Identity writer of the consumer's tenant namespace (identities get, update). The
// consumer peered with a peering user and gave back a slice (whose certificate stays
// valid, its grant gone); the provider keeps a grant of the consumer's user that
// unauthenticate does not know of. The writer puts the slice's certificate (this cluster's
// key, the pinned CA) in the control-plane Identity. unauthenticate with the peering user
// proves the revocation with the consumer's own certificate: what must hold is that it
// never says "Access revoked: verified" from a certificate of the slice's user, who never
// held the consumer's grants.
func TestAttack68IdentityWriterPutsASlicesCertificateInTheControlPlaneIdentity(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	startControllers(t, c, authmanager.Consumer)
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, "slice-a68c", "", "1")))
	sliceKubeconfig(t, c, p, "slice-a68c")
	cTN := wire.TenantNamespaceName(p.id)
	var sl authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName("slice-a68c")}, &sl))
	mustCLI(t, "delete", "resourceslice", "slice-a68c", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)

	// The provider's administrator granted the consumer's user more than unauthenticate knows of.
	grantLeftBehind(t, p, c.id)

	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	var cp authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &cp))
	cp.Spec.AuthParams.SignedCRT = sl.Spec.AuthParams.SignedCRT
	require.NoError(t, writer.Update(ctx, &cp))

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	t.Logf("unauthenticate: err=%v\n%s", err, errOut)
	require.Error(t, err, "the grant left behind is not proven gone")
	assert.NotContains(t, errOut, "Access revoked: verified")
	assert.Contains(t, errOut, `holds a certificate for user "`+authn.SliceUserName("slice-a68c", c.id)+`", not "`+c.id+`"`)
	var crb rbacv1.ClusterRoleBinding
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: "left-behind"}, &crb), "the grant is still there")
}
