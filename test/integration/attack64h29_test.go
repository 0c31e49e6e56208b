package integration

// Attack 64 (helper-29): the proxy pin for every Identity (ee43ba0, 042123c), beside
// helper-30's attack64_test.go.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// h29Unpin removes the proxy key of c's tenant record of p, as the administrator: the
// record as a version before the proxy pin wrote it (or after the advised unpin).
func h29Unpin(t *testing.T, c, p *site) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = wire.DefaultLiqoNamespace, wire.TenantRecordName(p.id)
	require.NoError(t, c.client.Patch(context.Background(), cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/proxyURL"}]`))))
}

// legacyProxiedPeering peers c with p through a forwarding proxy X (connectProxy), as
// before the proxy pin: the record then loses its proxy key (h29Unpin). It returns X and
// its count of tunnels.
func legacyProxiedPeering(t *testing.T, c, p *site) (string, *atomic.Int64) {
	t.Helper()
	x, tunnels := connectProxy(t)
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x)...)
	h29Unpin(t, c, p)
	return x, tunnels
}

// TestAttack64H29ProxiedPeeringBeforeThePinWithoutAManager: no attacker, a real user. The
// consumer peered with liqoctl authenticate --tenant-proxy-url X (X the way to the
// provider) with no manager on the consumer (liqoctl's in-process controllers), before the
// proxy pin existed (the record has no proxy key: emulated by removing it). After the
// upgrade, what must hold: liqoctl verify does not silently bypass X (on ee43ba0 it went
// to the provider directly) but says no proxy is pinned and how to pin one, and the
// remedy it and the refusals advise (liqoctl authenticate --tenant-proxy-url X again) pins
// X, leaves the Identity ready, and verify goes through X. Found by helper-29 on 042123c.
func TestAttack64H29ProxiedPeeringBeforeThePinWithoutAManager(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	startControllers(t, p, authmanager.Provider)
	x, tunnels := legacyProxiedPeering(t, c, p)

	before := tunnels.Load()
	ok, detail := verifyAuthentication(t, c, p)
	assert.False(t, ok, "verify of a peering through X made before the pin bypassed X: %s", detail)
	assert.Contains(t, detail, "--tenant-proxy-url", "verify says how to pin the proxy")
	assert.Equal(t, before, tunnels.Load())

	// The remedy the identity controller's refusal advises.
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x)...)
	require.NoError(t, err, "stderr:\n%s", errOut)
	t.Logf("re-run:\n%s", errOut)
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	if ptr.Deref(rec.ProxyURL, "<nil>") != x {
		t.Errorf("the advised liqoctl authenticate --tenant-proxy-url X did not pin X (record: %s); its output:\n%s", ptr.Deref(rec.ProxyURL, "<nil>"), errOut)
	}
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id))
	if ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady); assert.NotNil(t, ready) {
		assert.Equal(t, metav1ConditionTrue, string(ready.Status), "the Identity after the advised re-run: %s %s", ready.Reason, ready.Message)
	}
	before = tunnels.Load()
	ok, detail = verifyAuthentication(t, c, p)
	assert.True(t, ok, "verify's authentication after the re-run: %s", detail)
	assert.Greater(t, tunnels.Load(), before, "verify after the advised re-run still bypasses X")
}

const metav1ConditionTrue = "True"

// TestAttack64H29IdentityWriterWritesTheProxyRefusalsAdvice acts as an Identity writer of
// the consumer's tenant namespace (identities get, update) on a peering with no proxy
// pinned (a peering older than the pin; the same after the advised unpin or an
// unauthenticate). It sets the control-plane Identity's proxy to text that reads as the
// rest of the refusal: a kubectl command that forgets the provider CA pin. What must hold:
// the refusal (ProxyNotPinned) does not carry the writer's command as the administrator
// would copy it. Found by helper-29 on 042123c, whose refusal pasted the proxy unquoted
// (on e7e5d61 the proxy URL check refused it, quoting the value).
func TestAttack64H29IdentityWriterWritesTheProxyRefusalsAdvice(t *testing.T) {
	t.Parallel()
	h29ForgedProxyRefusal(t, true, func(forged string) string {
		return `http://proxy.example.com:3128, which this cluster must reach it through since the provider moved. Its CA changed as well: forget the old CA pin first with ` + forged + ` then`
	})
}

// TestAttack64H29IdentityWriterWritesTheProxyRefusalsAdviceWithAPin is the same attack on
// a peering that pinned no proxy explicitly (liqoctl authenticate without
// --tenant-proxy-url pins ""): the refusal (CheckPinnedProxy) quotes the Identity's proxy
// as it is too, beside the kubectl command it does build. Found by helper-29 on 042123c
// (e7e5d61 wrote the same message); cluster.DescribeProxy now quotes it.
func TestAttack64H29IdentityWriterWritesTheProxyRefusalsAdviceWithAPin(t *testing.T) {
	t.Parallel()
	h29ForgedProxyRefusal(t, false, func(forged string) string {
		return `http://proxy.example.com:3128 (the provider's new way in; its CA changed too: forget the old CA pin first with ` + forged + `)`
	})
}

// h29ForgedProxyRefusal peers c with p (no proxy; with unpin, the administrator then
// forgets the pin) and, as an Identity writer (identities get, update), sets the
// control-plane Identity's proxy to payload around a forged kubectl command that forgets
// the CA pin. The refusal must not carry that command as the administrator would copy it.
func h29ForgedProxyRefusal(t *testing.T, unpin bool, payload func(forged string) string) {
	t.Helper()
	c, p := cliSites(t)
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	if unpin {
		h29Unpin(t, c, p)
	}
	forged := `kubectl patch configmap -n ` + wire.DefaultLiqoNamespace + ` ` + wire.TenantRecordName(p.id) +
		` --type=json -p '[{"op":"remove","path":"/data/caFingerprint"}]'`
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	key := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	rewrite(t, writer, key, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To(payload(forged))
	})
	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the Identity decided", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, key, &id); err != nil {
			return false, err
		}
		return id.Status.ObservedGeneration == id.Generation, nil
	})
	ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	require.NotNil(t, ready)
	t.Logf("refusal: %s: %s", ready.Reason, ready.Message)
	assert.Equal(t, "False", string(ready.Status))
	assert.NotContains(t, ready.Message, forged, "the refusal carries the Identity writer's command, ready to copy")
}

// TestAttack64H29ManualFlowThroughAProxy: no attacker, a real user. The manual flow
// through proxy X: create nonce on the provider, generate tenant --tenant-proxy-url X on
// the consumer (which pins X), the Tenant applied on the provider, generate identity
// there and the Identity applied on the consumer. What must hold: the Identity is
// accepted, a slice reaches the provider through X, verify proves the identity through X.
func TestAttack64H29ManualFlowThroughAProxy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	x, tunnels := connectProxy(t)
	C, P := []string{"--kubeconfig", c.cp.Kubeconfig}, []string{"--kubeconfig", p.cp.Kubeconfig}
	mustCLI(t, append([]string{"create", "nonce", "--remote-cluster-id", c.id}, P...)...)
	nonce, _ := mustCLI(t, append([]string{"get", "nonce", "--remote-cluster-id", c.id}, P...)...)
	tenantYAML, _ := mustCLI(t, append([]string{"generate", "tenant", "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce), "--tenant-proxy-url", x}, C...)...)
	applyYAML(t, p.client, []byte(tenantYAML))
	var identityYAML string
	eventually(t, 60*time.Second, "generate identity", func(context.Context) (bool, error) {
		out, _, err := runCLI(t, append([]string{"generate", "identity", "--remote-cluster-id", c.id}, P...)...)
		identityYAML = out
		return err == nil, nil
	})
	applyYAML(t, c.client, []byte(identityYAML))
	cTN := wire.TenantNamespaceName(p.id)
	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the Identity decided", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady) != nil && id.Status.ObservedGeneration == id.Generation, nil
	})
	ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	require.Equal(t, metav1ConditionTrue, string(ready.Status), "the Identity of the manual flow through X: %s %s", ready.Reason, ready.Message)
	assert.Equal(t, x, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))

	rs := localSlice(c, p, "slice-manual", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	kc := sliceKubeconfig(t, c, p, rs.Name)
	assert.Contains(t, string(kc), x, "the slice kubeconfig does not go through X")
	afterSlice := tunnels.Load()
	assert.Positive(t, afterSlice, "the slice controller did not reach the provider through X")
	ok, detail := verifyAuthentication(t, c, p)
	assert.True(t, ok, "verify: %s", detail)
	assert.Greater(t, tunnels.Load(), afterSlice, "verify did not go through X")
}
