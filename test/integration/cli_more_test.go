package integration

import (
	"context"
	"crypto/rsa"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// restrictedKubeconfig writes a kubeconfig holding a token of the liqo-auth-manager
// ServiceAccount that liqoctl install creates: exactly what the manager holds in a cluster.
func restrictedKubeconfig(t *testing.T, s *site) string {
	t.Helper()
	cfg, err := s.cp.ServiceAccountConfig(context.Background(), wire.DefaultLiqoNamespace, wire.ManagerName)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(path, s.id, cfg))
	return path
}

// TestManagerRBACIsEnough runs both managers with only their own ClusterRole: the whole
// handshake, renewal watching and teardown work with exactly those permissions.
func TestManagerRBACIsEnough(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	cm := startManager(t, c, "--kubeconfig", restrictedKubeconfig(t, c))
	pm := startManager(t, p, "--kubeconfig", restrictedKubeconfig(t, p), "--api-server-url", p.cp.URL, "--peer-gone-after=1h")
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	assertInOrder(t, errOut, publishedSteps)
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	pTN := wire.TenantNamespaceName(c.id)
	// What the admission policies bound, as the manager makes it: the presence Lease, a
	// slice's Role and binding, and its own binding in a namespace it designates.
	eventuallyNoError(t, ctx, "the presence Lease created by the manager", func(ctx context.Context) error {
		return p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.PresenceLeaseName}, &coordinationv1.Lease{})
	})
	mustCLI(t, "create", "resourceslice", "slice-r", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--cpu", "1")
	var role rbacv1.Role
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.SliceAccessName("slice-r")}, &role), "the slice's Role")
	designated := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName("cl-liqo-made"), Labels: cluster.TenantNamespaceLabels("cl-liqo-made")}}
	require.NoError(t, p.client.Create(ctx, designated))
	eventuallyNoError(t, ctx, "the manager bound itself in the namespace it designated", func(ctx context.Context) error {
		return p.client.Get(ctx, client.ObjectKey{Namespace: designated.Name, Name: wire.ManagerName}, &rbacv1.RoleBinding{})
	})
	mustCLI(t, "delete", "resourceslice", "slice-r", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	_, errOut = mustCLI(t, pairArgs("unauthenticate", c, p)...)
	assert.Contains(t, errOut, "Access revoked: verified")
	for _, m := range []*testenv.Manager{cm, pm} {
		logs := strings.ToLower(m.Logs())
		assert.NotContains(t, logs, "forbidden", "the manager never lacks a permission:\n%s", m.Logs())
	}
}

// TestCLIRSACompatibility: a consumer installed with --tls-compatibility holds an RSA-2048
// key; the handshake works the same.
func TestCLIRSACompatibility(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "rsa-consumer", "rsa-provider")
	mustCLI(t, "install", "--kubeconfig", cps[0].Kubeconfig, "--cluster-id", "cl-rsa", "--tls-compatibility")
	mustCLI(t, "install", "--kubeconfig", cps[1].Kubeconfig, "--cluster-id", "cl-provider")
	c := &site{cp: cps[0], id: "cl-rsa", client: newClient(t, cps[0].Config)}
	p := &site{cp: cps[1], id: "cl-provider", client: newClient(t, cps[1].Config)}
	key, err := cluster.GetClusterKey(context.Background(), c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	rsaKey, ok := key.(*rsa.PrivateKey)
	require.True(t, ok, "the key is RSA")
	assert.Equal(t, 2048, rsaKey.N.BitLen())
	mustCLI(t, pairArgs("authenticate", c, p)...)
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
}

// TestCLIProxyURLAndCompletion: --tenant-proxy-url reaches the Tenant, the Identity and the
// kubeconfig; completion lists contexts and known remote cluster IDs.
func TestCLIProxyURLAndCompletion(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const proxy = "socks5://proxy.example.com:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", proxy)...)
	var tn authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &tn))
	assert.Equal(t, proxy, ptr.Deref(tn.Spec.ProxyURL, ""))
	assert.Equal(t, proxy, ptr.Deref(tn.Status.AuthParams.ProxyURL, ""))
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id))
	assert.Equal(t, proxy, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))
	assert.Contains(t, string(kubeconfigOf(t, c, p)), "proxy-url: "+proxy)
	_, err := authn.ReadKubeconfig(kubeconfigOf(t, c, p))
	require.NoError(t, err)

	out, _ := mustCLI(t, "__complete", "get", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", "")
	assert.Contains(t, out, c.id, "remote cluster IDs complete from the tenant namespaces")
	out, _ = mustCLI(t, "__complete", "authenticate", "--remote-kubeconfig", p.cp.Kubeconfig, "--remote-context", "")
	assert.Contains(t, out, "provider", "contexts complete from the kubeconfig")
	out, _ = mustCLI(t, "__complete", "info", "--kubeconfig", c.cp.Kubeconfig, "-n", "")
	assert.Contains(t, out, wire.DefaultLiqoNamespace, "namespaces complete from the cluster")
	out, _ = mustCLI(t, "completion", "bash")
	assert.Contains(t, out, "__start_liqoctl")
}

// TestCLIManagerVersionAndImage: liqoctl version and info show the version of the
// cluster's liqo-auth-manager; install --with-manager names the image of its own version,
// which a development build has not: it says to pass --manager-image.
func TestCLIManagerVersionAndImage(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "versions")[0]
	mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", "cl-v")
	s := &site{cp: cp, id: "cl-v", client: newClient(t, cp.Config)}
	out, _ := mustCLI(t, "version", "--kubeconfig", cp.Kubeconfig)
	assert.Contains(t, out, "liqoctl dev")
	assert.Contains(t, out, "liqo-auth-manager: none runs in cluster cl-v")
	startManager(t, s)
	out, _ = mustCLI(t, "version", "--kubeconfig", cp.Kubeconfig)
	assert.Contains(t, out, "liqo-auth-manager dev (cluster cl-v")
	out, _ = mustCLI(t, "version", "--kubeconfig", cp.Kubeconfig, "-o", "jsonpath={.manager.version}")
	assert.Equal(t, "dev", out)
	out, _ = mustCLI(t, "info", "--kubeconfig", cp.Kubeconfig)
	assert.Contains(t, out, "version dev")

	_, _, err := runCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--with-manager")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "development build")
	assert.Contains(t, err.Error(), "--manager-image")
	mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--with-manager", "--manager-image", "registry.example/liqo-auth-manager:1")
	var d appsv1.Deployment
	require.NoError(t, s.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ManagerName}, &d))
	assert.Equal(t, "registry.example/liqo-auth-manager:1", d.Spec.Template.Spec.Containers[0].Image)
}
