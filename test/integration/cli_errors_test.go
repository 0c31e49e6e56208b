package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestCLIBadInputs checks that each bad input gets a message that says what is wrong and
// what to do, and changes nothing it should not.
func TestCLIBadInputs(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "bad-a", "bad-b")
	a, b := cps[0].Kubeconfig, cps[1].Kubeconfig
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable.kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(unreachable, "gone", &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAData: cps[0].CA.CertPEM}}))
	malformed := filepath.Join(dir, "malformed.kubeconfig")
	require.NoError(t, os.WriteFile(malformed, []byte("apiVersion: v1\nclusters: [this is: not: yaml"), 0o600))

	fails := func(wantAll []string, args ...string) {
		t.Helper()
		_, _, err := runCLI(t, args...)
		require.Error(t, err, "liqoctl %v must fail", args)
		for _, want := range wantAll {
			assert.Contains(t, err.Error(), want, "liqoctl %v", args)
		}
	}

	// Before install: the CRDs and the cluster identity are missing.
	fails([]string{"run liqoctl install"}, "authenticate", "--kubeconfig", a, "--remote-kubeconfig", b)
	fails([]string{"run liqoctl install"}, "create", "nonce", "--kubeconfig", b, "--remote-cluster-id", "cl-a")

	fails([]string{"--cluster-id", "not valid"}, "install", "--kubeconfig", a, "--cluster-id", "Bad_ID")
	fails([]string{"at most 51"}, "install", "--kubeconfig", a, "--cluster-id", strings.Repeat("a", 52))
	fails([]string{"--api-server-url"}, "install", "--kubeconfig", a, "--api-server-url", "http://insecure:80")
	fails([]string{"at least 10m0s"}, "install", "--kubeconfig", a, "--certificate-lifetime", "1m")
	fails([]string{"--output", `"xml"`, "allowed formats are", "yaml"}, "install", "--kubeconfig", a, "-o", "xml")
	fails([]string{"development build", "--manager-image"}, "install", "--kubeconfig", a, "--with-manager")
	fails([]string{"--manager-image goes with --with-manager"}, "install", "--kubeconfig", a, "--manager-image", "x:1")

	mustCLI(t, "install", "--kubeconfig", a, "--cluster-id", "cl-a")
	mustCLI(t, "install", "--kubeconfig", b, "--cluster-id", "cl-b")
	_, errOut := mustCLI(t, "install", "--kubeconfig", a)
	assert.Contains(t, errOut, "kept: it was already installed", "install is idempotent")
	fails([]string{"already installed with cluster ID \"cl-a\"", "never changes"}, "install", "--kubeconfig", a, "--cluster-id", "cl-other")

	fails([]string{"reach the same cluster"}, "authenticate", "--kubeconfig", a, "--remote-kubeconfig", a)
	fails([]string{"--remote-kubeconfig, --remote-context or --remote-server"}, "authenticate", "--kubeconfig", a)
	fails([]string{"(remote)", "cannot reach the API server at https://127.0.0.1:1", "re-run"}, "authenticate", "--kubeconfig", a, "--remote-kubeconfig", unreachable)
	fails([]string{"(local) loading kubeconfig"}, "authenticate", "--kubeconfig", malformed, "--remote-kubeconfig", b)
	fails([]string{"proxy URL"}, "authenticate", "--kubeconfig", a, "--remote-kubeconfig", b, "--tenant-proxy-url", "ftp://x")

	fails([]string{"this cluster's own ID"}, "create", "nonce", "--kubeconfig", b, "--remote-cluster-id", "cl-b")
	fails([]string{"--remote-cluster-id"}, "create", "nonce", "--kubeconfig", b, "--remote-cluster-id", "UPPER")
	fails([]string{"liqoctl create nonce"}, "get", "nonce", "--kubeconfig", b, "--remote-cluster-id", "cl-a")
	fails([]string{"--nonce", "get nonce prints it"}, "generate", "tenant", "--kubeconfig", a, "--remote-cluster-id", "cl-b", "--nonce", "not-a-nonce")
	fails([]string{"--expect-fingerprint"}, "generate", "tenant", "--kubeconfig", a, "--remote-cluster-id", "cl-b", "--nonce", strings.Repeat("A", 86)+"==", "--expect-fingerprint", "md5:x")
	fails([]string{"--remote-tenant-namespace \"Tenant_B\" is not a namespace name", "create nonce prints it"}, "generate", "tenant", "--kubeconfig", a, "--remote-cluster-id", "cl-b", "--nonce", strings.Repeat("A", 86)+"==", "--remote-tenant-namespace", "Tenant_B")
	fails([]string{"liqoctl create nonce"}, "generate", "identity", "--kubeconfig", b, "--remote-cluster-id", "cl-a", "--timeout", "5s")

	// A wrong nonce (well formed, but not the provider's): the provider refuses the
	// Tenant, and generate identity says why instead of waiting.
	mustCLI(t, "create", "nonce", "--kubeconfig", b, "--remote-cluster-id", "cl-a")
	wrong, err := authn.NewNonce()
	require.NoError(t, err)
	tenantYAML, _ := mustCLI(t, "generate", "tenant", "--kubeconfig", a, "--remote-cluster-id", "cl-b", "--nonce", wrong)
	applyYAML(t, newClient(t, cps[1].Config), []byte(tenantYAML))
	start := time.Now()
	fails([]string{"refused the handshake (SignatureInvalid)"}, "generate", "identity", "--kubeconfig", b, "--remote-cluster-id", "cl-a")
	assert.Less(t, time.Since(start), 30*time.Second, "a refusal ends the wait at once, not at the timeout")

	// Uninstall refuses while a peer exists.
	fails([]string{"unauthenticate", "--force"}, "uninstall", "--kubeconfig", b)
	_, errOut = mustCLI(t, "uninstall", "--kubeconfig", b, "--force", "--skip-confirm")
	assert.Contains(t, errOut, "lost access without notice")
	_, err = cluster.GetClusterID(context.Background(), newClient(t, cps[1].Config), wire.DefaultLiqoNamespace)
	assert.Error(t, err, "the identity is gone after uninstall")
}
