package integration

import (
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// TestManagerFlagsOnOneHost: --help exits 0 with the usage; two managers beside two
// clusters on one host run with the default flags; an address in use is reported with
// the flag to change.
func TestManagerFlagsOnOneHost(t *testing.T) {
	t.Parallel()
	bin := managerBinary(t)
	out, err := exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, "--help exits 0")
	assert.Contains(t, string(out), "--health-probe-bind-address")

	cps := testenv.New(t, "host-a", "host-b")
	installSites(t, cps, "cl-a", "cl-b")
	for _, cp := range cps {
		m, startManagerErr := testenv.StartManager(bin, []string{"--kubeconfig", cp.Kubeconfig}, 30*time.Second)
		require.NoError(t, startManagerErr, "a manager with the default flags beside %s", cp.Name)
		t.Cleanup(m.Stop)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	out, err = exec.Command(bin, "--kubeconfig", cps[0].Kubeconfig, "--health-probe-bind-address", l.Addr().String()).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "Set --health-probe-bind-address to a free address")
}
