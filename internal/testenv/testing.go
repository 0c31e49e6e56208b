package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvBinDir names the environment variable that points at the control-plane binaries.
// When it is unset, BinDir runs scripts/controlplane.sh, which builds them once.
const EnvBinDir = "LIQO_AUTH_CONTROLPLANE_DIR"

// ControlPlaneVersion names the cache directory scripts/controlplane.sh builds into by
// default; keep it in step with the script's defaults.
const ControlPlaneVersion = "v1.37.1-etcd-v3.7.0"

// BinDir returns the directory of the control-plane binaries: $LIQO_AUTH_CONTROLPLANE_DIR,
// else the default cache when a build is complete there, else what scripts/controlplane.sh
// builds (from within the repository).
func BinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	if cache, err := os.UserCacheDir(); err == nil {
		d := filepath.Join(cache, "liqo-auth", "controlplane", ControlPlaneVersion)
		if _, err := os.Stat(filepath.Join(d, ".complete")); err == nil {
			return d, nil
		}
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("%w: set %s to the directory of etcd, kube-apiserver and kube-controller-manager, or run from the repository", err, EnvBinDir)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "scripts", "controlplane.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testenv: scripts/controlplane.sh failed: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// ModuleRoot walks up from the working directory to the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// KeepLogsEnv, when set, makes New keep the log files of the control planes of a failed
// test in the temporary directory it names; by default they are removed like everything
// else, after their last lines are printed with the test's output.
const KeepLogsEnv = "LIQO_AUTH_TESTENV_KEEP_LOGS"

// New starts one control plane per name, in parallel, for the duration of a test. They
// are stopped and their directories removed when the test ends, even if it fails or
// panics; when it failed, the tails of their logs are printed first.
func New(t testing.TB, names ...string) []*ControlPlane {
	t.Helper()
	return NewWith(t, Options{}, names...)
}

// NewWith is New with the options of o (its Name, Dir and BinDir are each control
// plane's own).
func NewWith(t testing.TB, o Options, names ...string) []*ControlPlane {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "liqo-auth-testenv-")
	if err != nil {
		t.Fatal(err)
	}
	cps := make([]*ControlPlane, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			oi := o
			oi.Name, oi.Dir, oi.BinDir = name, filepath.Join(root, name), bin
			cps[i], errs[i] = Start(context.Background(), oi)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, cp := range cps {
			if cp != nil {
				cp.Stop()
			}
		}
		if t.Failed() {
			for _, cp := range cps {
				if cp != nil {
					t.Log(cp.Logs(30))
					_ = os.RemoveAll(filepath.Join(cp.Dir, "etcd"))
				}
			}
			// A failed test cleans up too; KeepLogsEnv keeps the full logs for a closer look.
			if os.Getenv(KeepLogsEnv) != "" {
				t.Logf("testenv: logs kept in %s (%s is set)", root, KeepLogsEnv)
				return
			}
		}
		_ = os.RemoveAll(root)
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return cps
}

// EnvNodeBinDir names the environment variable that points at scripts/node.sh's
// directory (kubelet, kube-proxy, kube-scheduler, pause). When it is unset, NodeBinDir
// runs scripts/node.sh, which installs the Debian packages a node needs and builds the
// rest once.
const EnvNodeBinDir = "LIQO_AUTH_NODE_DIR"

// NodeBinDir returns the directory of the node binaries: $LIQO_AUTH_NODE_DIR, else what
// scripts/node.sh prints (from within the repository; it returns at once when all is there).
func NodeBinDir() (string, error) {
	if d := os.Getenv(EnvNodeBinDir); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("%w: set %s to scripts/node.sh's directory, or run from the repository", err, EnvNodeBinDir)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "scripts", "node.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testenv: scripts/node.sh failed: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// NewWithNode starts one control plane with a node (Options.Node) for the duration of a
// test, with images imported into its container runtime. It is stopped, and what the
// node left on the machine removed, when the test ends, even if it fails. A node needs
// root: without it the test is skipped, saying so.
func NewWithNode(t testing.TB, name string, images ...NodeImage) *ControlPlane {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("testenv: a node (containerd, kubelet, a network namespace) needs root; this test runs as root in CI")
	}
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	nodeBin, err := NodeBinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "liqo-auth-testenv-")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := Start(context.Background(), Options{Name: name, Dir: filepath.Join(root, name), BinDir: bin,
		Node: &NodeOptions{BinDir: nodeBin, Images: images}})
	t.Cleanup(func() {
		if cp != nil {
			if t.Failed() {
				t.Log(cp.Logs(40))
			}
			if stopErr := cp.StopNode(); stopErr != nil {
				t.Errorf("testenv: cleaning up the node: %v", stopErr)
			}
			cp.Stop()
		}
		if t.Failed() && os.Getenv(KeepLogsEnv) != "" {
			_ = os.RemoveAll(filepath.Join(root, name, "etcd"))
			t.Logf("testenv: logs kept in %s (%s is set)", root, KeepLogsEnv)
			return
		}
		_ = os.RemoveAll(root)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
