package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestResourceSlicesWithControllersInProcess: on a pair authenticated with in-process
// controllers and no manager anywhere, slices are asked for, denied, given back with their
// proof, and drained, each command running the controllers it needs on each side it holds
// credentials for; without the provider's, a slice says which side needs a manager.
func TestResourceSlicesWithControllersInProcess(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	remote := []string{"--remote-kubeconfig", p.cp.Kubeconfig}
	pTN := wire.TenantNamespaceName(c.id)

	t.Run("without the provider's credentials it says which side needs a manager", func(t *testing.T) {
		_, errOut, err := runCLI(t, sliceArgs("create", "lonely", c, p, "--cpu", "1", "--timeout", "12s")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `no liqo-auth-manager seems to run on provider "`+p.id+`"`)
		assert.Contains(t, err.Error(), "--remote-kubeconfig")
		assert.Contains(t, errOut, "WARN (local) No answer from the provider yet")
		// Named, the provider's controllers decide the very slice that waited.
		_, errOut = mustCLI(t, sliceArgs("create", "lonely", c, p, append([]string{"--cpu", "1"}, remote...)...)...)
		assert.Contains(t, errOut, "INFO (remote) No liqo-auth-manager runs in this cluster: its provider controllers run in-process for this command")
		assert.Contains(t, errOut, "ResourceSlice accepted")
	})

	t.Run("the flow, with the slice's identity", func(t *testing.T) {
		_, errOut := mustCLI(t, sliceArgs("create", "slice-a", c, p, append([]string{"--cpu", "2"}, remote...)...)...)
		assert.Contains(t, errOut, "INFO (local) No liqo-auth-manager runs in this cluster: its consumer controllers run in-process for this command")
		kc := sliceKubeconfig(t, c, p, "slice-a")
		assert.True(t, canI(t, kc, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-a"))
	})

	t.Run("a denial says why", func(t *testing.T) {
		_, _, err := runCLI(t, sliceArgs("create", "slice-gpu", c, p, append([]string{"--cpu", "1", "--class", "gpu"}, remote...)...)...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `the provider denied ResourceSlice slice-gpu`)
		assert.Contains(t, err.Error(), `class "gpu" is not offered`)
	})

	t.Run("deletion proves the revocation", func(t *testing.T) {
		_, errOut := mustCLI(t, sliceArgs("delete", "slice-a", c, p, remote...)...)
		assert.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
		mustCLI(t, sliceArgs("delete", "slice-gpu", c, p, remote...)...)
	})

	t.Run("drain removes and proves", func(t *testing.T) {
		_, errOut := mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		assert.Contains(t, errOut, "its provider controllers run in-process")
		assert.Contains(t, errOut, "1 ResourceSlices deleted")
		assert.Contains(t, errOut, "revoked: verified")
	})

	t.Run("a remote kubeconfig of another cluster is refused", func(t *testing.T) {
		_, _, err := runCLI(t, sliceArgs("create", "slice-c", c, p, "--cpu", "1", "--remote-kubeconfig", c.cp.Kubeconfig)...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `reaches cluster "`+c.id+`", not provider "`+p.id+`"`)
	})
}
