package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cmd/root"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// runCLI runs liqoctl in-process, through its real command tree, with test streams.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return runCLIContext(ctx, args...)
}

// mustCLI runs liqoctl and fails the test if it fails.
func mustCLI(t testing.TB, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	require.NoError(t, err, "liqoctl %v\nstderr:\n%s", args, errOut)
	return out, errOut
}

// applyYAML creates every object of a multi-document YAML stream, as kubectl apply does
// for new objects.
func applyYAML(t testing.TB, c client.Client, data []byte) {
	t.Helper()
	require.NoError(t, testenv.ApplyYAML(context.Background(), c, data))
}

var (
	managerBuild    sync.Once
	managerBinPath  string
	managerBuildErr error
)

// managerBinary builds cmd/liqo-auth-manager once per test binary.
func managerBinary(t testing.TB) string {
	t.Helper()
	managerBuild.Do(func() {
		dir, err := os.MkdirTemp("", "liqo-auth-manager-bin-")
		if err != nil {
			managerBuildErr = err
			return
		}
		managerBinPath = filepath.Join(dir, "liqo-auth-manager")
		managerBuildErr = goBuild(dir, "./cmd/liqo-auth-manager")
	})
	require.NoError(t, managerBuildErr)
	return managerBinPath
}

// goBuild builds packages of this module into dir, as the release does (static, -trimpath).
func goBuild(dir string, pkgs ...string) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-trimpath", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}

// startManager runs liqo-auth-manager against a site until it is stopped or the test
// ends, and waits until it holds its Lease.
func startManager(t testing.TB, s *site, extra ...string) *testenv.Manager {
	t.Helper()
	args := append([]string{"--kubeconfig", s.cp.Kubeconfig, "--health-probe-bind-address=0", "--zap-log-level=info"}, extra...)
	m, err := testenv.StartManager(managerBinary(t), args, time.Minute)
	require.NoError(t, err, "liqo-auth-manager on %s", s.id)
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			t.Logf("liqo-auth-manager on %s:\n%s", s.id, m.Logs())
		}
	})
	return m
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}
func (l *lockedBuffer) String() string { return string(l.Bytes()) }

func metaOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// runCLIContext runs liqoctl with a caller's context (to interrupt it).
func runCLIContext(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := root.NewCmd(streams)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}
