package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// attackerProxy is the proxy a status writer publishes: a host of its choosing that the
// consumer's traffic to the provider would go through.
const attackerProxy = "http://proxy.attacker.example:3128"

// TestAttack60TenantStatusWriterPublishesAProxy acts as a status writer of the provider's
// tenant namespace (tenants/status). The proxy a consumer reaches the provider through is
// the consumer's choice (--tenant-proxy-url, in the Tenant's spec); the provider copies it
// into status.authParams, and the Identity is made from that status. The status writer
// publishes its own proxy there on an accepted Tenant. Neither the provider's
// administrator handing the Identity over (liqoctl generate identity) nor the consumer's
// run that makes its Identity again may take it: the provider's controllers put back the
// proxy the spec asks for, and both commands wait for them.
func TestAttack60TenantStatusWriterPublishesAProxy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	writer := principal(t, p, "tenant-status-writer", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update"))
	publish := func() {
		t.Helper()
		rewrite(t, writer, client.ObjectKey{Namespace: pTN, Name: c.id}, true, func(tn *authv1beta1.Tenant) {
			tn.Status.AuthParams.ProxyURL = ptr.To(attackerProxy)
		})
	}

	// The provider's administrator hands the Identity over by hand.
	publish()
	out, errOut := mustCLI(t, "generate", "identity", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", c.id)
	assert.NotContains(t, out, "attacker", "generate identity handed over the status writer's proxy\nstderr:\n%s", errOut)
	assert.Contains(t, out, "controlplane-"+p.id)
	var tn authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn))
	assert.Empty(t, ptr.Deref(tn.Status.AuthParams.ProxyURL, ""), "the provider's controllers put back the proxy the spec asks for")

	// The consumer's administrator removed the Identity; the run that makes it again.
	publish()
	require.NoError(t, c.client.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(p.id)}}))
	eventually(t, 30*time.Second, "the Identity gone", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	_, errOut = mustCLI(t, pairArgs("authenticate", c, p)...)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the Identity took the status writer's proxy\nstderr:\n%s", errOut)
	assert.NotContains(t, string(kubeconfigOf(t, c, p)), "attacker", "the kubeconfig reaches the provider through the status writer's proxy")
}

// TestAuthenticateKeepsThePinnedProxy: a run that asks for another proxy than the one the
// consumer pinned at its first handshake (here: none, the flag forgotten) is refused with
// what to do (a dry run says so too), and changes nothing; the run with the same proxy
// goes on, and generate identity shows the provider's administrator the proxy it hands
// over; once the peering is removed (unauthenticate), a new one goes without the proxy.
func TestAuthenticateKeepsThePinnedProxy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const proxy = "socks5://proxy.example.com:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", proxy)...)
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}
	var before authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, key, &before))

	for _, dry := range []bool{true, false} {
		args := pairArgs("authenticate", c, p)
		if dry {
			args = append(args, "--dry-run")
		}
		_, errOut, err := runCLI(t, args...)
		require.Error(t, err, "a run with another proxy went on (dry run %v)\nstderr:\n%s", dry, errOut)
		assert.ErrorIs(t, err, handshake.ErrProxyChanged)
		assert.Contains(t, err.Error(), "pinned "+cluster.DescribeProxy(proxy))
		assert.Contains(t, err.Error(), cluster.UnpinProxyCommand(wire.DefaultLiqoNamespace, p.id))
	}
	var after authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, key, &after))
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the Identity was rewritten")

	_, errOut := mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", proxy)...)
	assert.Contains(t, errOut, "nothing to do")

	// The provider's administrator handing the Identity over is shown the proxy, which
	// whoever may write the Tenant may have changed.
	out, errOut := mustCLI(t, "generate", "identity", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", c.id)
	assert.Contains(t, out, "proxyURL: "+proxy)
	assert.Contains(t, errOut, "names "+cluster.DescribeProxy(proxy))

	// The peering removed, a new one chooses its own way to the provider.
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	require.NoError(t, c.client.Get(ctx, key, &after))
	assert.Empty(t, ptr.Deref(after.Spec.AuthParams.ProxyURL, ""))
	assert.NotContains(t, string(kubeconfigOf(t, c, p)), "proxy-url")
}

// TestAttack60SliceStatusWriterPublishesAProxy acts as a status writer of the provider's
// copies of ResourceSlices (resourceslices/status in the provider's tenant namespace; Liqo's
// liqo-remote-controlplane grants it to the tenant itself). It publishes its own proxy and
// API server in an accepted slice's answer while the provider's controllers are down. The
// consumer's slice Identity, made again from that answer, still reaches the provider as the
// control-plane Identity does.
func TestAttack60SliceStatusWriterPublishesAProxy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	runner := startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	ctx := context.Background()
	rs := localSlice(c, p, "slice-proxy", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	sliceKubeconfig(t, c, p, rs.Name)
	var cp authv1beta1.Identity
	cTN, pTN := wire.TenantNamespaceName(p.id), wire.TenantNamespaceName(c.id)
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &cp))

	require.NoError(t, runner.Stop())
	writer := principal(t, p, "slice-status-writer", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get"),
		rule(authv1beta1.GroupVersion.Group, "resourceslices/status", "get", "update"))
	const server = "https://127.0.0.1:9"
	rewrite(t, writer, client.ObjectKey{Namespace: pTN, Name: rs.Name}, true, func(answer *authv1beta1.ResourceSlice) {
		answer.Status.AuthParams.ProxyURL, answer.Status.AuthParams.APIServer = ptr.To(attackerProxy), server
	})
	// The consumer makes the slice Identity again (its administrator removed it).
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(rs.Name)}
	var old authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, idKey, &old))
	require.NoError(t, c.client.Delete(ctx, &old))
	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the slice Identity made again", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, idKey, &id)
		return err == nil && id.UID != old.UID, client.IgnoreNotFound(err)
	})
	var got authv1beta1.ResourceSlice
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(rs), &got))
	require.Equal(t, attackerProxy, ptr.Deref(got.Status.AuthParams.ProxyURL, ""), "the consumer read the forged answer")
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the slice Identity took the status writer's proxy")
	assert.Equal(t, cp.Spec.AuthParams.APIServer, id.Spec.AuthParams.APIServer, "the slice Identity took the status writer's API server")
	kc := sliceKubeconfig(t, c, p, rs.Name)
	assert.False(t, strings.Contains(string(kc), "attacker") || strings.Contains(string(kc), server), "the slice kubeconfig reaches the provider elsewhere:\n%s", kc)
}
