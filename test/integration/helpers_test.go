package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
)

// site is one control plane with liqo-auth installed.
type site struct {
	cp     *testenv.ControlPlane
	id     string
	client client.WithWatch
}

func newClient(t testing.TB, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return c
}

// installSites installs liqo-auth on each control plane with the given cluster IDs.
func installSites(t testing.TB, cps []*testenv.ControlPlane, ids ...string) []*site {
	t.Helper()
	ctx := context.Background()
	out := make([]*site, len(cps))
	for i, cp := range cps {
		c := newClient(t, cp.Config)
		res, err := installer.EnsureInstalled(ctx, c, installer.InstallOptions{Namespace: wire.DefaultLiqoNamespace, ClusterID: ids[i]})
		require.NoError(t, err)
		require.Equal(t, ids[i], res.ClusterID)
		out[i] = &site{cp: cp, id: ids[i], client: c}
	}
	return out
}

func testLogger(t testing.TB) logr.Logger {
	return zap.New(zap.WriteTo(testWriter{t}), zap.UseDevMode(true))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// startControllers runs the selected controllers in-process against s until the test ends.
func startControllers(t testing.TB, s *site, role authmanager.Role, mut ...func(*authmanager.Options)) *authmanager.Runner {
	t.Helper()
	o := authmanager.Options{Role: role,
		Tenant: issuing.Options{APIServer: s.cp.URL, CA: s.cp.CA.CertPEM}}
	for _, m := range mut {
		m(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := authmanager.Start(ctx, s.cp.Config, authmanager.Connection{}, o, testLogger(t))
	require.NoError(t, err)
	require.NoError(t, r.WaitSynced(ctx))
	t.Cleanup(func() {
		cancel()
		_ = r.Stop()
	})
	return r
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil && (last == nil || !cutShort(ctx, err)) {
			last = err
		}
		return ok, nil
	})
	require.NoError(t, err, "%s (last error: %v)", what, last)
}

// cutShort says whether err is only the poll's deadline (the context, or a client's rate
// limiter refusing to wait past it): it says nothing of the condition, so the error before
// it is kept.
func cutShort(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline")
}

// restConfigFromKubeconfig turns kubeconfig bytes into a client configuration.
func restConfigFromKubeconfig(t testing.TB, data []byte) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	require.NoError(t, err)
	return cfg
}

func secret(ns, name string, labels map[string]string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
}

// ensureTN makes the tenant namespace of remoteID as liqoctl does (namespace, record,
// manager binding) and returns its name.
func ensureTN(t testing.TB, c client.Client, remoteID string) string {
	t.Helper()
	tn, err := cluster.EnsureTenantNamespace(context.Background(), c, wire.DefaultLiqoNamespace, remoteID, false)
	require.NoError(t, err)
	return tn.Name
}

// tenantBindings lists RoleBindings, leaving out liqo-auth-manager's own binding in each
// tenant namespace and a peering user's: what remains is what was granted to tenants.
func tenantBindings(t testing.TB, c client.Client, opts ...client.ListOption) []rbacv1.RoleBinding {
	t.Helper()
	var rbs rbacv1.RoleBindingList
	require.NoError(t, c.List(context.Background(), &rbs, opts...))
	return slices.DeleteFunc(rbs.Items, func(b rbacv1.RoleBinding) bool {
		return b.Name == wire.ManagerName || b.Labels[wire.PeeringUserLabel] != ""
	})
}

// requireNonceConsumed asserts that the nonce Secret s of consumerID is consumed as the
// provider's tenant record (read through c) says, the only place that says it: the Secret
// itself is left as it was issued.
func requireNonceConsumed(t testing.TB, c client.Client, consumerID string, s *corev1.Secret) {
	t.Helper()
	rec, err := cluster.GetTenantRecord(context.Background(), c, wire.DefaultLiqoNamespace, consumerID)
	require.NoError(t, err)
	require.True(t, rec.NonceUsed(string(s.Data[wire.NonceField]), string(s.UID)), "the tenant record of %s lists nonce %s/%s as consumed", consumerID, s.Namespace, s.Name)
	require.NotContains(t, s.Annotations, wire.NonceConsumedAtAnnotation, "the nonce Secret %s/%s is not written after its issue", s.Namespace, s.Name)
}
