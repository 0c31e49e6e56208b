package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/startup"
)

// TestMain removes what the package built for itself (the liqo-auth-manager and liqoctl
// binaries, the manager image), even when tests fail; each control plane cleans up after
// its own test. The CLI runs in this process (runCLI): its informers fill as liqoctl's main
// makes them (cli.ListingInformers), and its garbage collector is turned back on as
// liqoctl's main does once it started (startup.Done): off, everything the tests ever
// allocate, three at a time, would stay in memory.
func TestMain(m *testing.M) {
	startup.Done()
	cli.ListingInformers(os.Getenv)
	code := m.Run()
	for _, bin := range []string{managerBinPath, liqoctlBinPath, imageLayout} {
		if bin != "" {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
