package integration

// Attack 60c: helper-26's attacks on the proxy pin (80141e7), each failing there.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestAttack60cAdvisedUnpinIsTakenBackByTheIdentityController: no attacker, what a real
// user does. The consumer peered through proxy P1 and wants P2: liqoctl authenticate
// --tenant-proxy-url P2 is refused and advises "forget the pin with kubectl patch ... and
// authenticate again". The administrator runs exactly that command (on the consumer's
// tenant record, an administrator's write), then authenticate with P2: the run goes on
// and the Identity reaches the provider through P2. Found by helper-26 on 80141e7, where
// the identity controller, watching tenant records, pinned P1 again from the old Identity.
func TestAttack60cAdvisedUnpinIsTakenBackByTheIdentityController(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const p1, p2 = "socks5://proxy-one.example.com:1080", "socks5://proxy-two.example.com:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", p1)...)

	_, _, err := runCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", p2)...)
	require.ErrorIs(t, err, handshake.ErrProxyChanged)
	require.Contains(t, err.Error(), cluster.UnpinProxyCommand(wire.DefaultLiqoNamespace, p.id))

	// The administrator runs the advised command: kubectl patch ... remove /data/proxyURL.
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = wire.DefaultLiqoNamespace, wire.TenantRecordName(p.id)
	require.NoError(t, c.client.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/proxyURL"}]`))))

	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", p2)...)
	assert.NoError(t, err, "the advised unpin did not let the run change the proxy\nstderr:\n%s", errOut)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id))
	assert.Equal(t, p2, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))
}

// TestAttack60cIdentityWriterPinsItsProxyAfterUnauthenticate acts as an Identity writer of
// the consumer's tenant namespace (identities get, create). The consumer peered with no
// proxy; its administrator removes the peering (liqoctl unauthenticate, which forgets the
// pinned proxy: "a new peering chooses its own"). Before the next handshake the writer
// creates a decoy slice Identity naming the provider, with the provider's CA (read from
// the old Identity: public anyway), a certificate that is no certificate at all, and its
// own proxy. The identity controller refuses the decoy and pins nothing from it (only a
// handshake pins), and the administrator's new peering chooses its own way: liqoctl
// authenticate (no proxy) goes on, and the record pins no proxy but its own. Found by
// helper-26 on 80141e7, where the controller pinned the decoy's proxy on first use.
func TestAttack60cIdentityWriterPinsItsProxyAfterUnauthenticate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "create"))
	var old authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &old))

	// The consumer's administrator removes the peering.
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)

	decoy := &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.SliceIdentityName("decoy"),
			Labels: map[string]string{wire.RemoteClusterIDLabel: p.id, wire.SliceNameLabel: "decoy"}},
		Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(p.id), Type: authv1beta1.ResourceSliceIdentityType,
			Namespace: old.Spec.Namespace, AuthParams: authv1beta1.AuthParams{APIServer: old.Spec.AuthParams.APIServer,
				CA: old.Spec.AuthParams.CA, SignedCRT: []byte("not a certificate"), ProxyURL: ptr.To(attackerProxy)}},
	}
	require.NoError(t, writer.Create(ctx, decoy))
	// The controller decides on the decoy (read by the test, not the writer).
	eventually(t, 30*time.Second, "the decoy decided", func(ctx context.Context) (bool, error) {
		var got authv1beta1.Identity
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(decoy), &got); err != nil {
			return false, err
		}
		return len(got.Status.Conditions) > 0, nil
	})
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.NotEqual(t, attackerProxy, ptr.Deref(rec.ProxyURL, ""), "an Identity the controller refused pinned the writer's proxy")

	// The administrator peers again, asking for no proxy.
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	assert.NoError(t, err, "the new peering could not choose its own way to the provider\nstderr:\n%s", errOut)
	if err != nil {
		assert.NotContains(t, err.Error(), "pinned "+cluster.DescribeProxy(attackerProxy)+" for provider \""+p.id+"\" at its first handshake",
			"the refusal says this cluster chose the writer's proxy")
	}
	rec, err = cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.Equal(t, ptr.To(""), rec.ProxyURL, "the record pins %s", cluster.DescribeProxy(ptr.Deref(rec.ProxyURL, "?")))
}

// TestAttack60cIdentityWriterPinsItsProxyOnAPeeringBeforeThePin acts as an Identity writer
// of the consumer's tenant namespace (identities get, update) on a peering made before the
// proxy pin existed (its tenant record pins the CA, no proxy: emulated by removing the
// key, as the previous version wrote it). While the consumer's manager is down (its
// upgrade to the version that pins), the writer points the control-plane Identity at its
// own forwarding proxy, and the slice Identity too. What must hold: the control-plane
// Identity is refused (ProxyNotPinned: with no proxy pinned, only none is taken), the
// kubeconfig the controller wrote before stays, no slice Identity takes the writer's
// proxy, nothing tunnels through it, and the administrator's re-run of liqoctl
// authenticate (no proxy) applies the Identity again with no proxy. Found by helper-26 on
// 80141e7, and a known finding still on e7e5d61, where an Identity was taken with any
// proxy while none was pinned.
func TestAttack60cIdentityWriterPinsItsProxyOnAPeeringBeforeThePin(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	startControllers(t, p, authmanager.Provider)
	runner := startControllers(t, c, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	rs := localSlice(c, p, "slice-preupgrade", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	sliceKubeconfig(t, c, p, rs.Name)
	cTN := wire.TenantNamespaceName(p.id)

	// The peering as the previous version left it: the consumer's manager stops for its
	// upgrade, and its tenant record pins no proxy (setup, as that version wrote it).
	require.NoError(t, runner.Stop())
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = wire.DefaultLiqoNamespace, wire.TenantRecordName(p.id)
	require.NoError(t, c.client.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/proxyURL"}]`))))

	proxy, tunnels := connectProxy(t)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	cpKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	rewrite(t, writer, cpKey, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To(proxy)
	})
	sliceKey := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(rs.Name)}
	rewrite(t, writer, sliceKey, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To(proxy)
	})

	// The upgraded manager starts.
	startControllers(t, c, authmanager.Consumer)
	// The slice controller writes the slice Identity again (the writer touched it).
	var sliceID authv1beta1.Identity
	eventually(t, 30*time.Second, "the slice Identity written again and decided", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, sliceKey, &sliceID); err != nil {
			return false, err
		}
		return sliceID.Status.ObservedGeneration == sliceID.Generation && meta.FindStatusCondition(sliceID.Status.Conditions, authv1beta1.ConditionReady) != nil, nil
	})
	var cpID authv1beta1.Identity
	eventually(t, 30*time.Second, "the control-plane Identity decided", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, cpKey, &cpID); err != nil {
			return false, err
		}
		return cpID.Status.ObservedGeneration == cpID.Generation, nil
	})
	ready := meta.FindStatusCondition(cpID.Status.Conditions, authv1beta1.ConditionReady)
	if assert.NotNil(t, ready) {
		assert.Equal(t, string(authn.ReasonProxyNotPinned), ready.Reason, "the control-plane Identity with the writer's proxy: %s", ready.Message)
		assert.Contains(t, ready.Message, "--tenant-proxy-url", "the refusal says how to pin a proxy")
	}
	var secret corev1.Secret
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(cpKey.Name)}, &secret))
	assert.NotContains(t, string(secret.Data[wire.KubeconfigField]), proxy, "the control-plane kubeconfig tunnels through the Identity writer's host")
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.False(t, rec != nil && ptr.Deref(rec.ProxyURL, "") == proxy, "the identity controller pinned the Identity writer's proxy")
	// The slice Identity the writer pointed at its proxy is refused, or written again
	// without it; the slice kubeconfig written before holds no proxy.
	if ptr.Deref(sliceID.Spec.AuthParams.ProxyURL, "") == proxy {
		sliceReady := meta.FindStatusCondition(sliceID.Status.Conditions, authv1beta1.ConditionReady)
		assert.Equal(t, string(authn.ReasonProxyNotPinned), sliceReady.Reason, "the slice Identity with the writer's proxy: %s", sliceReady.Message)
	}
	var sliceSecret corev1.Secret
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(sliceKey.Name)}, &sliceSecret))
	assert.NotContains(t, string(sliceSecret.Data[wire.KubeconfigField]), proxy, "the slice kubeconfig tunnels through the Identity writer's host")

	// The consumer's administrator re-runs the handshake, asking for no proxy.
	_, errOut, runErr := runCLI(t, pairArgs("authenticate", c, p)...)
	assert.NoError(t, runErr, "the administrator's re-run could not mend the peering\nstderr:\n%s", errOut)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, cpKey, &id))
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the control-plane Identity stays on the writer's proxy")
	// The slice follows: written again with the pinned proxy (none), and ready.
	assert.NotContains(t, string(sliceKubeconfig(t, c, p, rs.Name)), "proxy-url", "the slice kubeconfig after the re-run")
	assert.Zero(t, tunnels.Load(), "something reached the provider through the Identity writer's proxy")
}
