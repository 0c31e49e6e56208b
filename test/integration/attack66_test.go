package integration

// Attack 66 (helper-32): the re-pin of an unpinned proxy read live by Inspect, and
// unauthenticate's refusal with a peering user before it removes anything (57f684d),
// replaced by RevocationCredential: a revocation is proven the unpinned way (none).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// a66TenantGone says whether the provider p holds no Tenant of consumer c any more.
func a66TenantGone(t *testing.T, c, p *site) bool {
	t.Helper()
	err := p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return false
}

// TestAttack66IdentityWriterBlocksTheRevocationOfALegacyPeering acts as an Identity writer
// of the consumer's tenant namespace (identities get, update). The consumer peered
// directly (no proxy) with a peering user's kubeconfig before the proxy pin (its record
// has no proxy key). The writer puts its own proxy Z in the control-plane Identity; the
// administrator then runs liqoctl unauthenticate with the same peering user. What must
// hold: the writer's word cannot stop the revocation: the provider's Tenant of the
// consumer (its access) is removed, and nothing goes through Z. Found by helper-32 on the
// 57f684d: unauthenticate refuses before it removes
// anything whenever the Identity names a proxy while none is pinned, whoever wrote it, and
// the consumer keeps its access on the provider until the administrator peers again.
func TestAttack66IdentityWriterBlocksTheRevocationOfALegacyPeering(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	h29Unpin(t, c, p)

	cTN := wire.TenantNamespaceName(p.id)
	z, tunnels := connectProxy(t)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	var id authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	id.Spec.AuthParams.ProxyURL = ptr.To(z)
	require.NoError(t, writer.Update(ctx, &id))

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	t.Logf("unauthenticate: err=%v\n%s", err, errOut)
	assert.Zero(t, tunnels.Load(), "the consumer reached the provider through the Identity writer's proxy")
	assert.True(t, a66TenantGone(t, c, p),
		"an Identity writer's proxy kept the consumer's Tenant (its access) on the provider: unauthenticate revoked nothing: %v", err)
}

// TestAttack66RefusalAfterDeletingTheSlicesSaysNothingWasRemoved: no attacker, a real
// user. The consumer peered through proxy X with a peering user's kubeconfig before the
// proxy pin (its record has no proxy key) and holds a ResourceSlice of the provider. The
// administrator runs liqoctl unauthenticate --delete-resourceslices with that peering
// user. Found by helper-32 on 57f684d, where unauthenticate's Run deleted the slices and
// Pair.Unauthenticate then refused, saying "Nothing was removed". Now nothing refuses. The
// consumer's controllers, which take no unpinned proxy, cannot reach the provider, so they
// let the local slice go and its copy there stays with its grant. What must hold: the
// command says so (the slice's access is not revoked, and who removes the copy), nothing
// goes through X, and never "Nothing was removed".
func TestAttack66RefusalAfterDeletingTheSlicesSaysNothingWasRemoved(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu, _, tunnels := authenticateThroughProxyAsPeeringUser(t, c, p)
	startControllers(t, c, authmanager.Consumer)
	rs := localSlice(c, p, "slice-a66", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	sliceKubeconfig(t, c, p, rs.Name)
	h29Unpin(t, c, p)

	before := tunnels.Load()
	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu, "--delete-resourceslices")
	t.Logf("unauthenticate: err=%v\n%s", err, errOut)
	// The slice's proof finds its access left (the copy stays); the Tenant's deletion then
	// takes the copy and its grant, and the proof asked again holds.
	assert.Contains(t, errOut, "access not revoked: the identity of ResourceSlice slice-a66 may still")
	require.NoError(t, err)
	assert.Contains(t, errOut, "Access of the identity of ResourceSlice slice-a66 revoked with the Tenant: verified")
	assert.NotContains(t, errOut, "Nothing was removed")
	assert.Equal(t, before, tunnels.Load(), "the slice's revocation went through a proxy no handshake pinned")
	err = p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: rs.Name}, &authv1beta1.ResourceSlice{})
	assert.True(t, apierrors.IsNotFound(err), "the copy went with the Tenant: %v", err)
}

// TestAttack66DecoyAfterUnauthenticateAdvisesANewHandshake acts as an Identity writer of
// the consumer's tenant namespace (identities get, create). The consumer peered with a
// peering user's kubeconfig (the proxy pin in force: none), and the administrator ran
// liqoctl unauthenticate with it, which verified the revocation and forgot the pinned
// proxy. The writer had read the Identity and now creates it again, naming its own proxy
// Z; the administrator runs unauthenticate again (it is idempotent). What must hold: with
// no Tenant left on the provider, the command does not advise a new handshake (liqoctl
// authenticate again), which re-enables every certificate of the consumer that has not
// expired (docs/security.md, Revocation). Found by helper-32 on the uncommitted change
// after 1891414 (57f684d): the refusal for a peering user advises re-running
// authenticate, on the writer's word alone.
func TestAttack66DecoyAfterUnauthenticateAdvisesANewHandshake(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	cTN := wire.TenantNamespaceName(p.id)
	key := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "create"))
	var old authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, key, &old))
	_, errOut := mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	require.Contains(t, errOut, "Access revoked: verified")
	require.True(t, a66TenantGone(t, c, p))

	z, tunnels := connectProxy(t)
	decoy := &authv1beta1.Identity{}
	decoy.Namespace, decoy.Name, decoy.Labels, decoy.Spec = old.Namespace, old.Name, old.Labels, *old.Spec.DeepCopy()
	decoy.Spec.AuthParams.ProxyURL = ptr.To(z)
	require.NoError(t, writer.Create(ctx, decoy))

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	t.Logf("second unauthenticate: err=%v\n%s", err, errOut)
	assert.Zero(t, tunnels.Load(), "the consumer reached the provider through the Identity writer's proxy")
	if err != nil {
		assert.NotContains(t, err.Error(), "run liqoctl authenticate",
			"with no Tenant on the provider, unauthenticate advised a new handshake (which re-enables the consumer's unexpired certificates) on an Identity writer's proxy")
	}
}
