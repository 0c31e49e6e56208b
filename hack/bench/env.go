package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// env is a consumer and a provider control plane, installed.
type env struct {
	cfg                config
	consumer, provider *testenv.ControlPlane
	pc                 client.WithWatch
	// consumers is the provider administrator's client without client-side rate limit,
	// through which the virtual consumers of the scale runs act: each stands for a
	// cluster with its own client, so that one shared limit must not pace them.
	consumers client.WithWatch
}

func newEnv(ctx context.Context, c config, binDir, root string) (*env, error) {
	e := &env{cfg: c}
	var errs [2]error
	var wg sync.WaitGroup
	for i, name := range []string{"consumer", "provider"} {
		wg.Go(func() {
			cp, err := testenv.Start(ctx, testenv.Options{Name: name, Dir: filepath.Join(root, name), BinDir: binDir, PriorityAndFairness: c.priorityAndFairness})
			errs[i] = err
			if i == 0 {
				e.consumer = cp
			} else {
				e.provider = cp
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.stop()
			return nil, err
		}
	}
	for cp, id := range map[*testenv.ControlPlane]string{e.consumer: "cl-consumer", e.provider: "cl-provider"} {
		if _, err := e.liqoctl(ctx, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", id); err != nil {
			e.stop()
			return nil, err
		}
	}
	// Each manager runs as its ServiceAccount, as it does in a cluster: only the
	// permissions liqoctl install grants it, and the API server's token cache instead of a
	// client certificate verified on every request.
	for _, cp := range []*testenv.ControlPlane{e.consumer, e.provider} {
		if err := cp.WriteManagerKubeconfig(ctx); err != nil {
			e.stop()
			return nil, err
		}
	}
	pc, err := client.NewWithWatch(e.provider.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	e.pc = pc
	if e.consumers, err = testenv.UnthrottledClient(e.provider.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) stop() {
	for _, cp := range []*testenv.ControlPlane{e.consumer, e.provider} {
		if cp != nil {
			cp.Stop()
		}
	}
}

// liqoctl runs the built binary and returns its stderr.
func (e *env) liqoctl(ctx context.Context, args ...string) (string, error) {
	_, errOut, err := e.liqoctlOut(ctx, args...)
	return errOut, err
}

func (e *env) liqoctlOut(ctx context.Context, args ...string) (string, string, error) {
	return testenv.RunCommand(ctx, filepath.Join(e.cfg.bin, "liqoctl"), args...)
}

// startManager runs liqo-auth-manager for cp and waits until it holds its Lease.
func (e *env) startManager(cp *testenv.ControlPlane, extra ...string) (*testenv.Manager, error) {
	m, err := testenv.StartManager(filepath.Join(e.cfg.bin, "liqo-auth-manager"), append(append([]string{"--kubeconfig", cp.ManagerKubeconfig(), "--health-probe-bind-address=0"}, e.cfg.managerArgs...), extra...), 60*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cp.Name, err)
	}
	return m, nil
}

// usage reads a process's peak RSS (MiB) and CPU seconds from /proc.
func usage(pid int) (peakMiB float64, cpu float64) {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			var kb float64
			if _, err := fmt.Sscanf(l, "VmHWM: %f kB", &kb); err == nil {
				peakMiB = kb / 1024
			}
		}
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		var ut, st float64
		_, _ = fmt.Sscan(f[11], &ut) // a field that does not parse counts as 0
		_, _ = fmt.Sscan(f[12], &st)
		cpu = (ut + st) / 100 // clock ticks; 100 on Linux
	}
	return peakMiB, cpu
}
