package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the package built for itself (the liqo-auth-manager binary), even
// when tests fail; each control plane cleans up after its own test.
func TestMain(m *testing.M) {
	code := m.Run()
	if managerBinPath != "" {
		_ = os.RemoveAll(filepath.Dir(managerBinPath))
	}
	os.Exit(code)
}
