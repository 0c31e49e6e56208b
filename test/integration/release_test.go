package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// releaseManifest reads deploy/liqo-auth.yaml, the release manifest.
func releaseManifest(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "liqo-auth.yaml"))
	require.NoError(t, err)
	return data
}

// TestReleaseManifestIdentityIsEnough applies the release manifest (kubectl apply of
// deploy/liqo-auth.yaml, as GitOps does) to two real control planes and runs each
// liqo-auth-manager with nothing but a token of the manifest's ServiceAccount: it writes
// the cluster ID and key the manifest leaves empty, and a whole handshake, a renewal and
// the teardown work without any other credential in the managers' hands.
func TestReleaseManifestIdentityIsEnough(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "release-consumer", "release-provider")
	ctx := context.Background()
	sites := make([]*site, 2)
	for i, cp := range cps {
		c := newClient(t, cp.Config)
		applyYAML(t, c, releaseManifest(t))
		require.NoError(t, installer.WaitCRDsEstablished(ctx, c))
		sites[i] = &site{cp: cp, client: c}
	}
	c, p := sites[0], sites[1]
	managers := []*testenv.Manager{
		startManager(t, c, "--kubeconfig", restrictedKubeconfig(t, c)),
		startManager(t, p, append([]string{"--kubeconfig", restrictedKubeconfig(t, p), "--api-server-url", p.cp.URL}, renewingProvider...)...),
	}
	for _, s := range sites {
		id, err := cluster.GetClusterID(ctx, s.client, wire.DefaultLiqoNamespace)
		require.NoError(t, err, "the manager wrote the cluster ID the manifest left empty")
		s.id = id
		_, err = cluster.GetClusterKey(ctx, s.client, wire.DefaultLiqoNamespace)
		require.NoError(t, err, "the manager wrote the key the manifest left empty")
	}

	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	assertInOrder(t, errOut, publishedSteps)
	assert.NotContains(t, errOut, "in-process", "the managers do the work")
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	first := identitySerial(t, c, p)
	eventually(t, 60*time.Second, "the consumer's manager picks up a renewed certificate", func(context.Context) (bool, error) {
		s := identitySerial(t, c, p)
		return s != "" && s != first, nil
	})
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	_, errOut = mustCLI(t, pairArgs("unauthenticate", c, p)...)
	assert.Contains(t, errOut, "Access revoked: verified")
	for _, m := range managers {
		assert.NotContains(t, strings.ToLower(m.Logs()), "forbidden", "the ServiceAccount is enough:\n%s", m.Logs())
	}
}

// TestReleaseManifestPassesRestrictedPodSecurity: the Deployment of the release manifest,
// dry-run into a namespace that enforces and warns on the restricted Pod Security
// Standard, draws no warning; a privileged one does, so the check can fail.
func TestReleaseManifestPassesRestrictedPodSecurity(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "pss")[0]
	ctx := context.Background()
	admin := newClient(t, cp.Config)
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}))
	var warnings warningLog
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = &warnings
	c := newClient(t, cfg)

	var deploy *appsv1.Deployment
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(releaseManifest(t))), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d.Kind == "Deployment" {
			deploy = &d
			break
		}
	}
	require.NotNil(t, deploy, "the release manifest holds the manager's Deployment")
	var liqoNS corev1.Namespace
	for nsDec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(releaseManifest(t))), 4096); liqoNS.Kind != "Namespace"; {
		liqoNS = corev1.Namespace{}
		require.NoError(t, nsDec.Decode(&liqoNS), "the release manifest holds the Liqo namespace")
	}
	assert.Equal(t, "restricted", liqoNS.Labels["pod-security.kubernetes.io/enforce"], "the namespace holding the cluster key enforces the restricted standard")
	assert.Equal(t, int32(2), ptr.Deref(deploy.Spec.Replicas, 0), "two replicas, one leader")
	assert.Contains(t, deploy.Spec.Template.Spec.Containers[0].Args, "--leader-elect")
	deploy.Namespace = "restricted"
	require.NoError(t, c.Create(ctx, deploy, client.DryRunAll))
	assert.Empty(t, warnings.all(), "the manager's pod passes the restricted standard")

	bad := deploy.DeepCopy()
	bad.Spec.Template.Spec.HostNetwork = true
	bad.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities = nil
	require.NoError(t, c.Create(ctx, bad, client.DryRunAll))
	assert.NotEmpty(t, warnings.all(), "a pod on the host network keeping its capabilities is warned about: the check works")
}

// warningLog keeps the warnings the API server sent.
type warningLog struct {
	mu sync.Mutex
	w  []string
}

func (l *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w = append(l.w, text)
}

func (l *warningLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.w...)
}
