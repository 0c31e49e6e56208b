package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the package built for itself (the liqo-auth-manager and liqoctl
// binaries, the manager image), even when tests fail; each control plane cleans up after
// its own test.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range []string{managerBinPath, liqoctlBinPath, imageLayout} {
		if bin != "" {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
