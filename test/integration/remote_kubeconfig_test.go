package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestRemoteKubeconfigRunsNothingUnsaid: a --remote-kubeconfig is a file the other side's
// administrator may have written. One that would run a credential plugin follows kubectl's
// kuberc policy, and is refused before the plugin runs when the policy forbids it; when it
// may run, liqoctl says so before it does. One that reads local files (a token file sent as
// a bearer token) says which. The local kubeconfig follows the same policy, as kubectl's.
func TestRemoteKubeconfigRunsNothingUnsaid(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "plugin-ran")
	plugin := filepath.Join(dir, "credential-plugin")
	cred := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":%q,"clientKeyData":%q}}`,
		string(p.cp.Config.CertData), string(p.cp.Config.KeyData))
	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/sh\ntouch '"+marker+"'\ncat <<'EOF'\n"+cred+"\nEOF\n"), 0o755))
	execKubeconfig := writeKubeconfig(t, dir, "exec.kubeconfig", p, &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}})
	kuberc := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n"+body), 0o600))
		return path
	}
	// A kuberc that sets no policy: kubectl's default, and none of the machine running
	// the test.
	noPolicy := kuberc("none", "")
	dryRun := func(extra ...string) (string, error) {
		_ = os.Remove(marker)
		_, errOut, err := runCLI(t, append([]string{"authenticate", "--dry-run", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", execKubeconfig}, extra...)...)
		return errOut, err
	}
	ran := func() bool { _, err := os.Stat(marker); return err == nil }

	t.Run("DenyAll refuses before the plugin runs", func(t *testing.T) {
		_, err := dryRun("--kuberc", kuberc("deny", "credentialPluginPolicy: DenyAll\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(remote)")
		assert.Contains(t, err.Error(), "DenyAll")
		assert.Contains(t, err.Error(), "liqoctl generate peering-user", "it says what to ask for instead")
		assert.False(t, ran(), "the plugin did not run")
	})
	t.Run("an allowlist without it refuses", func(t *testing.T) {
		_, err := dryRun("--kuberc", kuberc("other", "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- command: /bin/true\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "credentialPluginAllowlist")
		assert.False(t, ran())
	})
	t.Run("an allowlist with it runs it, said first", func(t *testing.T) {
		errOut, err := dryRun("--kuberc", kuberc("allow", "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- command: "+plugin+"\n"))
		require.NoError(t, err, errOut)
		assert.True(t, ran())
		assertWarnedFirst(t, errOut, "WARN (remote) The remote kubeconfig runs the credential plugin "+plugin)
	})
	t.Run("without a kuberc every plugin may run, as in kubectl, said first", func(t *testing.T) {
		errOut, err := dryRun("--kuberc", noPolicy)
		require.NoError(t, err, errOut)
		assert.True(t, ran())
		assertWarnedFirst(t, errOut, "WARN (remote) The remote kubeconfig runs the credential plugin "+plugin)
	})
	t.Run("a token file is named with the server it is sent to", func(t *testing.T) {
		token := filepath.Join(dir, "my-local-token")
		require.NoError(t, os.WriteFile(token, []byte("not-a-valid-token"), 0o600))
		kc := writeKubeconfig(t, dir, "tokenfile.kubeconfig", p, &clientcmdapi.AuthInfo{TokenFile: token})
		_, errOut, _ := runCLI(t, "authenticate", "--dry-run", "--kuberc", noPolicy, "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", kc)
		assertWarnedFirst(t, errOut, "WARN (remote) The remote kubeconfig reads the local file "+token+" and sends it as a bearer token to "+p.cp.URL)
	})
	t.Run("the local kubeconfig follows the policy too", func(t *testing.T) {
		_ = os.Remove(marker)
		_, _, err := runCLI(t, "info", "--kuberc", kuberc("deny-local", "credentialPluginPolicy: DenyAll\n"), "--kubeconfig", execKubeconfig)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "DenyAll")
		assert.False(t, ran())
	})
	t.Run("an embedded kubeconfig says nothing", func(t *testing.T) {
		_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--dry-run", "--kuberc", noPolicy)...)
		require.NoError(t, err)
		assert.NotContains(t, errOut, "The remote kubeconfig")
	})
}

// writeKubeconfig writes a kubeconfig for site s's API server with user u.
func writeKubeconfig(t *testing.T, dir, name string, s *site, u *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["p"] = &clientcmdapi.Cluster{Server: s.cp.URL, CertificateAuthorityData: s.cp.CA.CertPEM}
	kc.AuthInfos["p"] = u
	kc.Contexts["p"] = &clientcmdapi.Context{Cluster: "p", AuthInfo: "p"}
	kc.CurrentContext = "p"
	path := filepath.Join(dir, name)
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// assertWarnedFirst checks that warning is printed before any step on the remote cluster.
func assertWarnedFirst(t *testing.T, errOut, warning string) {
	t.Helper()
	i := strings.Index(errOut, warning)
	require.GreaterOrEqual(t, i, 0, "missing %q in\n%s", warning, errOut)
	if j := strings.Index(errOut, "INFO (remote)"); j >= 0 {
		assert.Less(t, i, j, "the warning comes before anything is done on the remote cluster:\n%s", errOut)
	}
}
