package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// TestLoadConcurrentConsumers authenticates N consumers (200 unless LIQO_AUTH_LOAD_N says
// otherwise: 1 in 200 was refused by the stripped-nonce bug) concurrently into one provider
// running liqo-auth-manager. A consumer is a key pair without a control plane of its own:
// the provider side is the real one. Every handshake is accepted at once (the manager's
// metrics count no refusal), every identity works, none may reach another's namespace,
// and after all unauthenticate nothing is left.
func TestLoadConcurrentConsumers(t *testing.T) {
	// Serial: a flood of handshakes that uses both CPUs: beside other tests it would only slow them.
	n := 200
	if v, err := strconv.Atoi(os.Getenv("LIQO_AUTH_LOAD_N")); err == nil && v > 0 {
		n = v
	}
	p := installSites(t, testenv.New(t, "load-provider"), "cl-provider")[0]
	addr := freeLoopbackAddr(t)
	startManager(t, p, "--metrics-bind-address="+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	consumers := make([]*testenv.VirtualConsumer, n)
	users := make([]client.Client, n)
	for i := range consumers {
		v, err := testenv.NewVirtualConsumer(fmt.Sprintf("cl-load-%03d", i))
		require.NoError(t, err)
		consumers[i] = v
	}
	start := time.Now()
	var eg errgroup.Group
	for i, a := range consumers {
		eg.Go(func() error {
			cfg, err := a.Authenticate(ctx, p.client, p.id)
			if err != nil {
				return fmt.Errorf("%s: %w", a.ID, err)
			}
			rc, err := clientcmd.RESTConfigFromKubeConfig(cfg)
			if err != nil {
				return err
			}
			users[i], err = client.New(rc, client.Options{Scheme: scheme.New()})
			return err
		})
	}
	require.NoError(t, eg.Wait())
	t.Logf("%d consumers authenticated in %s", n, time.Since(start))
	body := waitSample(t, addr, "every handshake accepted", func(v float64) bool { return v == float64(n) },
		metrics.HandshakesName, "reason", authv1beta1.ReasonHandshakeAccepted, "result", metrics.ResultAccepted)
	var refused []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, `result="refused"`) {
			refused = append(refused, line)
		}
	}
	assert.Empty(t, refused, "no handshake refused, not even for a moment (the series name the reasons)")

	for i, a := range consumers {
		own := wire.TenantNamespaceName(a.ID)
		neighbour := wire.TenantNamespaceName(consumers[(i+1)%n].ID)
		eventuallyNoError(t, ctx, a.ID+" uses its identity", func(ctx context.Context) error {
			return users[i].Create(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-", Namespace: own}})
		})
		err := users[i].List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(neighbour))
		assert.True(t, apierrors.IsForbidden(err), "%s must not list in %s: %v", a.ID, neighbour, err)
	}

	for _, a := range consumers {
		eg.Go(func() error {
			tn := &authv1beta1.Tenant{ObjectMeta: metaOf(wire.TenantNamespaceName(a.ID), a.ID)}
			if err := p.client.Delete(ctx, tn); err != nil {
				return err
			}
			return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)), nil
			})
		})
	}
	require.NoError(t, eg.Wait())
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(ctx, &csrs))
	assert.Empty(t, csrs.Items, "no CSR left")
	assert.Empty(t, tenantBindings(t, p.client, client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}), "no binding left")
	var nonces corev1.SecretList
	require.NoError(t, p.client.List(ctx, &nonces, client.MatchingLabels{wire.NonceLabel: "true"}))
	// Nonces outlive their Tenant, as Liqo's re-run expects, bound to the key that used them.
	assert.Len(t, nonces.Items, n, "each consumer's nonce is kept")
	for _, s := range nonces.Items {
		requireNonceConsumed(t, p.client, s.Labels[wire.RemoteClusterIDLabel], &s)
	}
	for i, a := range consumers {
		err := users[i].List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(wire.TenantNamespaceName(a.ID)))
		assert.True(t, apierrors.IsForbidden(err), "%s lost its access: %v", a.ID, err)
	}
}

func eventuallyNoError(t *testing.T, ctx context.Context, what string, f func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	require.NoError(t, err, "%s: %v", what, last)
}
