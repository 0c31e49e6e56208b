package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

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
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if err := writer.Get(ctx, cpKey, &id); err != nil {
			return err
		}
		id.Spec.AuthParams.ProxyURL = ptr.To(proxy)
		return writer.Update(ctx, &id)
	}))
	// The writer touches the slice Identity: its controller rewrites it.
	sliceKey := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(rs.Name)}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if err := writer.Get(ctx, sliceKey, &id); err != nil {
			return err
		}
		id.Spec.AuthParams.ProxyURL = ptr.To("socks5://touch.example:1080")
		return writer.Update(ctx, &id)
	}))
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
