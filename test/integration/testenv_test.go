package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// failedTB is a test that has failed: New's clean-up sees Failed() and runs when asked.
type failedTB struct {
	testing.TB
	cleanups []func()
}

func (f *failedTB) Failed() bool        { return true }
func (f *failedTB) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Log(args ...any)     {}
func (f *failedTB) Logf(string, ...any) {}
func (f *failedTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestControlPlanesCleanUpAfterAFailedTest: after a failed test, the control plane's
// processes are gone and so is its directory, unless LIQO_AUTH_TESTENV_KEEP_LOGS asks to
// keep the logs.
func TestControlPlanesCleanUpAfterAFailedTest(t *testing.T) {
	// Serial: it sets LIQO_AUTH_TESTENV_KEEP_LOGS for the whole process (t.Setenv).
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "keep logs"}[keep], func(t *testing.T) {
			if keep {
				t.Setenv(testenv.KeepLogsEnv, "1")
			} else {
				t.Setenv(testenv.KeepLogsEnv, "")
			}
			f := &failedTB{TB: t}
			cp := testenv.New(f, "failed")[0]
			root, pids := filepath.Dir(cp.Dir), cp.PIDs()
			t.Cleanup(func() { _ = os.RemoveAll(root) })
			require.NotEmpty(t, pids)
			f.runCleanups()
			for _, pid := range pids {
				require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still runs", pid)
			}
			_, err := os.Stat(root)
			if !keep {
				require.ErrorIs(t, err, os.ErrNotExist, "the control plane's directory is removed")
				return
			}
			require.NoError(t, err)
			logs, err := filepath.Glob(filepath.Join(cp.Dir, "logs", "*.log"))
			require.NoError(t, err)
			require.NotEmpty(t, logs, "the logs are kept")
		})
	}
}
