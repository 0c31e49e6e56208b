package integration

// helper-50 on 05e5a2e: the metrics collector reads a nonce the cache kept stripped
// through the manager's client (live, once per version).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// TestH50StrippedNonceCostsOneLiveReadAndGoesWithItsSecret. The provider's administrator
// made a tenant namespace and its nonce before the record (the cache keeps that nonce
// stripped, and the collector reads it live). Whoever may scrape the manager's metrics
// endpoint scrapes it many times: what must hold is that the API server serves at most a
// read or two of Secrets for all of them (once per version, not per scrape). Then a
// Secret writer of that tenant namespace (secrets get, delete there) deletes the nonce:
// the copy read live must not outlive it (no series for a nonce that no longer exists).
func TestH50StrippedNonceCostsOneLiveReadAndGoesWithItsSecret(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "h50-metrics"), "cl-provider")[0]
	addr := freeLoopbackAddr(t)
	startManager(t, p, "--consumer=false", "--metrics-bind-address="+addr)
	ctx := context.Background()

	const peer = "cl-h50early"
	early := wire.TenantNamespaceName(peer)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: early,
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: peer}}}))
	value, err := authn.NewNonce()
	require.NoError(t, err)
	require.NoError(t, p.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: early, Name: wire.NonceSecretName,
		Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: peer},
		Annotations: map[string]string{wire.NonceIssuedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Data: map[string][]byte{wire.NonceField: []byte(value)}}))
	time.Sleep(time.Second) // the cache takes it in, stripped
	mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", peer)
	waitSample(t, addr, "the stripped nonce", atLeast(0), metrics.NonceAgeName, "peer", peer)

	gets := func() float64 {
		v, err := testenv.ReadMetricSum(ctx, p.cp.Config, "apiserver_request_total", map[string]string{"verb": "GET", "resource": "secrets"})
		require.NoError(t, err)
		return v
	}
	before := gets()
	const scrapes = 40
	for range scrapes {
		body, err := scrape(ctx, addr)
		require.NoError(t, err)
		_, ok := sample(body, metrics.NonceAgeName, "peer", peer)
		require.True(t, ok, "the stripped nonce is reported at every scrape")
	}
	used := gets() - before
	t.Logf("GET secrets served during %d scrapes: %v", scrapes, used)
	assert.LessOrEqual(t, used, 3.0, "each scrape of a stripped nonce reads it live")

	// The Secret writer deletes the nonce: no series from a copy read live before.
	writer := principal(t, p, "h50-secret-writer", early, rule("", "secrets", "get", "delete"))
	require.NoError(t, writer.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: early, Name: wire.NonceSecretName}}))
	eventuallyNoError(t, ctx, "the deleted nonce's series goes", func(ctx context.Context) error {
		body, err := scrape(ctx, addr)
		if err != nil {
			return err
		}
		if _, ok := sample(body, metrics.NonceAgeName, "peer", peer); ok {
			return assert.AnError
		}
		return nil
	})
	var gone corev1.Secret
	assert.Error(t, p.client.Get(ctx, client.ObjectKey{Namespace: early, Name: wire.NonceSecretName}, &gone), "setup: the nonce is deleted")
}
