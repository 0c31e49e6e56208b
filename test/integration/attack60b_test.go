package integration

// Attack 60b: helper-25's attacks on the first proxy fix (2739ba1), each failing there.

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestAttack60bTenantWriterDictatesTheProxyAdvice acts as a Tenant writer of the provider's
// tenant namespace (tenants get, update). The consumer peered through its own proxy; the
// writer rewrites the accepted Tenant's spec.proxyURL (not covered by the acceptance seal)
// to a host of its choosing. The consumer's re-run with the proxy it asked for is never
// told to take the writer's (on 2739ba1 the refusal advised "--tenant-proxy-url=" with the
// Tenant's proxy: helper-25), and its Identity keeps the consumer's proxy: the reference
// is the proxy this cluster pinned in its own tenant record, not the provider's Tenant.
func TestAttack60bTenantWriterDictatesTheProxyAdvice(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const asked = "socks5://proxy.consumer.example:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	writer := tenantSpecWriter(t, p, pTN)
	rewrite(t, writer, client.ObjectKey{Namespace: pTN, Name: c.id}, false, func(tn *authv1beta1.Tenant) {
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
	})

	for _, dry := range []bool{true, false} {
		args := pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)
		if dry {
			args = append(args, "--dry-run")
		}
		_, errOut, err := runCLI(t, args...)
		if err == nil {
			continue
		}
		assert.NotContains(t, err.Error(), `--tenant-proxy-url="`+attackerProxy,
			"the consumer's re-run with its own proxy is told to take the Tenant writer's (dry run %v)\nstderr:\n%s", dry, errOut)
	}
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Equal(t, asked, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))
}

// TestAttack60bTenantWriterSwapsTheProxyWhileAuthenticateWaits acts as a Tenant writer of
// the provider's tenant namespace (tenants get, update: spec.proxyURL is not covered by the
// acceptance seal). The consumer runs liqoctl authenticate --tenant-proxy-url with its own
// proxy on a provider that requires approval; while the run waits for the provider's
// administrator, the writer rewrites the Tenant's spec.proxyURL to a host of its choosing.
// The administrator approves; the provider copies the spec's proxy into the status, and the
// consumer's Identity still carries the proxy the run asked for (ForgeIdentity is given
// the run's, never the Tenant's). Found by helper-25 on 2739ba1, where it took the writer's.
func TestAttack60bTenantWriterSwapsTheProxyWhileAuthenticateWaits(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	const asked = "socks5://proxy.consumer.example:1080"
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	key := client.ObjectKey{Namespace: pTN, Name: c.id}

	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type result struct {
		errOut string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, err := runCLIContext(actx, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
		done <- result{errOut, err}
	}()
	// The Tenant is on the provider and waits for approval (read by the test, not the writer).
	eventually(t, time.Minute, "the Tenant waits for approval", func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		if err := p.client.Get(ctx, key, &tn); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return awaitsApprovalForTest(&tn), nil
	})

	writer := tenantSpecWriter(t, p, pTN)
	rewrite(t, writer, key, false, func(tn *authv1beta1.Tenant) {
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
	})

	// The provider's administrator approves the key, as they were asked to.
	mustCLI(t, "approve", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	r := <-done
	var id authv1beta1.Identity
	err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id)
	if r.err == nil {
		require.NoError(t, err)
		assert.Equal(t, asked, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""),
			"authenticate --tenant-proxy-url %s made an Identity through the Tenant writer's proxy\nstderr:\n%s", asked, r.errOut)
		assert.NotContains(t, string(kubeconfigOf(t, c, p)), "attacker", "the kubeconfig reaches the provider through the Tenant writer's proxy")
		return
	}
	// A refusal is fine too, as long as nothing carries the writer's proxy.
	if err == nil {
		assert.NotEqual(t, attackerProxy, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the Identity carries the Tenant writer's proxy")
	}
}

// awaitsApprovalForTest: the Tenant's Approved condition is False (ApprovalPending).
func awaitsApprovalForTest(tn *authv1beta1.Tenant) bool {
	for _, c := range tn.Status.Conditions {
		if c.Type == authv1beta1.ConditionApproved && c.Reason == authv1beta1.ReasonApprovalPending {
			return true
		}
	}
	return false
}

// TestAttack60bTenantWriterProxyOutlivesTheConsumersReapply acts as a Tenant writer of
// the provider's tenant namespace (tenants get, update). The consumer peered with no proxy
// (the default). The writer puts its proxy in the accepted Tenant's spec.proxyURL and
// breaks the acceptance (another CSR: the seal no longer verifies over the spec). The
// consumer's administrator re-runs liqoctl authenticate, asking for no proxy, to mend the
// peering: the run exchanges a nonce and applies its Tenant again, whose server-side apply
// leaves the writer's proxy in place, and the provider copies it into the status; the
// consumer's new Identity still reaches the provider directly, as the run asked and this
// cluster pinned. Found by helper-25 on 2739ba1, where the Identity took the writer's proxy.
func TestAttack60bTenantWriterProxyOutlivesTheConsumersReapply(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	other := newAttacker(t, c.id)
	writer := tenantSpecWriter(t, p, pTN)
	rewrite(t, writer, client.ObjectKey{Namespace: pTN, Name: c.id}, false, func(tn *authv1beta1.Tenant) {
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
		tn.Spec.CSR = other.csr(t)
	})
	// The provider's controllers take the acceptance back (read by the test, not the writer).
	eventually(t, 30*time.Second, "the acceptance taken back", func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		if err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn); err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionAuthenticated), nil
	})
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("re-run: %v\n%s", err, errOut)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the consumer's Identity took the Tenant writer's proxy\nstderr:\n%s", errOut)
	assert.NotContains(t, string(kubeconfigOf(t, c, p)), "attacker")
}

// TestAttack60bTenantWriterRemovesTheProxySilently acts as a Tenant writer of the
// provider's tenant namespace (tenants get, update). The consumer asked to reach the
// provider through its proxy; the writer removes spec.proxyURL from the accepted Tenant.
// liqoctl generate identity warns the provider's administrator with the proxy it hands
// over, none included (on 8df8937 it warned only when there was one: helper-25), and the
// consumer's identity controller refuses the Identity, which does not reach the provider
// through the proxy the consumer pinned (ProxyNotPinned).
func TestAttack60bTenantWriterRemovesTheProxySilently(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const asked = "socks5://proxy.consumer.example:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
	pTN := wire.TenantNamespaceName(c.id)
	writer := tenantSpecWriter(t, p, pTN)
	rewrite(t, writer, client.ObjectKey{Namespace: pTN, Name: c.id}, false, func(tn *authv1beta1.Tenant) {
		tn.Spec.ProxyURL = nil
	})
	out, errOut := mustCLI(t, "generate", "identity", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", c.id)
	require.NotContains(t, out, asked, "the Identity kept the proxy (nothing to show)")
	assert.True(t, strings.Contains(errOut, "WARN") && strings.Contains(errOut, "names no proxy"),
		"generate identity handed over an Identity without the consumer's proxy and warned of nothing\nstderr:\n%s", errOut)

	// The consumer's administrator applies what was handed over; its controllers refuse it.
	var handed authv1beta1.Identity
	require.NoError(t, yaml.Unmarshal([]byte(out), &handed))
	startControllers(t, c, authmanager.Consumer)
	id := rewrite(t, c.client, client.ObjectKeyFromObject(&handed), false, func(id *authv1beta1.Identity) { id.Spec = handed.Spec })
	expectIdentityRefused(t, c, id, string(authn.ReasonProxyNotPinned))
	assert.Contains(t, string(kubeconfigOf(t, c, p)), "proxy-url: "+asked, "the kubeconfig still reaches the provider through the consumer's proxy")
}

// connectProxy is a forwarding HTTP CONNECT proxy that counts the tunnels it opened: an
// attacker's host that sees (and could cut) the traffic it relays.
func connectProxy(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var tunnels atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.DialTimeout("tcp", r.Host, 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			_ = up.Close()
			return
		}
		w.WriteHeader(http.StatusOK)
		conn, _, err := hj.Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		tunnels.Add(1)
		go func() { _, _ = io.Copy(up, conn); _ = up.Close() }()
		go func() { _, _ = io.Copy(conn, up); _ = conn.Close() }()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), &tunnels
}

// TestAttack60bIdentityWriterRoutesSlicesThroughItsProxy acts as an Identity writer of the
// consumer's tenant namespace (identities get, update). The writer points the control-plane
// Identity at its own forwarding proxy, then touches a slice Identity, whose API server
// and proxy the consumer's slice controller takes from the control-plane Identity. The
// slice Identity gets the proxy this cluster pinned for the provider instead, the identity
// controller refuses the control-plane Identity (ProxyNotPinned), nothing tunnels through
// the writer's host, and the administrator's re-run of liqoctl authenticate applies the
// Identity again with the run's proxy (State.Complete compares the Identity's proxy and
// server with the run's). Found by helper-25 on 2739ba1, where slices followed the
// writer's proxy and the re-run said there was nothing to do.
func TestAttack60bIdentityWriterRoutesSlicesThroughItsProxy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	ctx := context.Background()
	rs := localSlice(c, p, "slice-idproxy", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	sliceKubeconfig(t, c, p, rs.Name)
	cTN := wire.TenantNamespaceName(p.id)
	proxy, tunnels := connectProxy(t)

	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	cpKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	rewrite(t, writer, cpKey, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To(proxy)
	})
	// The writer touches the slice Identity: its controller rewrites it.
	sliceKey := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(rs.Name)}
	rewrite(t, writer, sliceKey, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To("socks5://touch.example:1080")
	})
	var sliceID authv1beta1.Identity
	eventually(t, 30*time.Second, "the slice Identity rewritten by its controller", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, sliceKey, &sliceID); err != nil {
			return false, err
		}
		return ptr.Deref(sliceID.Spec.AuthParams.ProxyURL, "") != "socks5://touch.example:1080", nil
	})
	assert.Empty(t, ptr.Deref(sliceID.Spec.AuthParams.ProxyURL, ""),
		"the slice controller wrote the Identity writer's proxy into the slice Identity (%d tunnels through it)", tunnels.Load())

	// The consumer's administrator re-runs the handshake, asking for no proxy.
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, cpKey, &id))
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""),
		"authenticate asking for no proxy left the control-plane Identity on the writer's proxy\nstderr:\n%s", errOut)
}
