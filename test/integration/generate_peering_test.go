package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestGeneratePeeringApplies: the GitOps flow end to end on real control planes. The
// provider's administrator issues a peering user; the consumer's administrator turns its
// kubeconfig into YAML with liqoctl generate peering, which connects with the peering user
// itself to read and pin the provider's cluster ID (without using the credential up), and
// applies that YAML as it is; the consumer's manager peers. A --provider-cluster-id that
// is not the provider the peering user reaches prints nothing.
func TestGeneratePeeringApplies(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)

	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	file := filepath.Join(t.TempDir(), "peering-user.kubeconfig")
	require.NoError(t, os.WriteFile(file, []byte(kubeconfig), 0o600))
	info, err := authn.ReadKubeconfig([]byte(kubeconfig))
	require.NoError(t, err)
	caPin, err := authn.CAFingerprint(info.CA)
	require.NoError(t, err)

	t.Run("a provider ID the peering user does not reach prints nothing", func(t *testing.T) {
		out, errOut, err := runCLI(t, "generate", "peering", "--peering-user-kubeconfig", file, "--provider-cluster-id", "cl-elsewhere")
		require.Error(t, err, errOut)
		assert.Contains(t, err.Error(), `reaches cluster "`+p.id+`", not --provider-cluster-id "cl-elsewhere"`)
		assert.Empty(t, out)
	})

	out, errOut := mustCLI(t, "generate", "peering", "--peering-user-kubeconfig", file)
	assert.Contains(t, errOut, `Connected as liqo-peer-user-`+c.id, "the peering user read the provider's cluster ID itself")
	assert.Equal(t, 1, strings.Count(errOut, "holds a credential: keep it out of plain Git"), "warned once:\n%s", errOut)
	assert.Contains(t, out, "kind: Secret")
	assert.Contains(t, out, "kind: Peering")

	applyYAML(t, c.client, []byte(out))
	name := "peering-" + p.id
	got := waitPeering(t, c.client, name, authv1beta1.ReasonPeered, 30*time.Second)
	assert.Equal(t, authv1beta1.PeeringPeered, got.Status.State)
	assert.Equal(t, authv1beta1.ClusterID(p.id), got.Spec.ProviderClusterID, "pinned from the provider")
	assert.Equal(t, authv1beta1.ClusterID(p.id), got.Status.ProviderClusterID)
	assert.Equal(t, caPin, got.Spec.ProviderCAFingerprint, "the CA the kubeconfig trusts is pinned")
	assert.Equal(t, name+"-bootstrap", got.Spec.BootstrapSecretRef.Name)
	require.NotNil(t, got.Status.Certificate)
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
}
