// Command devclusters starts and stops local Kubernetes control planes (etcd,
// kube-apiserver, kube-controller-manager) in the background, for demos, benchmarks and
// trying liqoctl by hand:
//
//	devclusters up --dir DIR NAME...   start one control plane per NAME; DIR/NAME/kubeconfig
//	devclusters down --dir DIR         stop exactly the processes started in DIR
//
// The binaries come from $LIQO_AUTH_CONTROLPLANE_DIR, or are built once by
// scripts/controlplane.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devclusters:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: devclusters up|down --dir DIR [NAME...]")
	}
	fs := flag.NewFlagSet("devclusters "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".devclusters", "directory of the control planes")
	audit := fs.Bool("audit", false, "up: each API server writes an audit event per request to DIR/NAME/logs/audit.log")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(abs, fs.Args(), *audit, stdout)
	case "down":
		return down(abs, stdout)
	default:
		return fmt.Errorf("unknown command %q: use up or down", args[0])
	}
}

func up(dir string, names []string, audit bool, stdout io.Writer) error {
	if len(names) == 0 {
		return errors.New("name at least one control plane: devclusters up --dir DIR NAME...") //nolint:staticcheck // ST1005: the "..." is the usage's, not punctuation
	}
	for _, n := range names {
		if err := cluster.ValidateClusterID(n); err != nil {
			return fmt.Errorf("name %q: %w", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, n, "pids")); err == nil {
			return fmt.Errorf("%s already runs in %s: run devclusters down --dir %s first", n, dir, dir)
		}
	}
	bin, err := testenv.BinDir()
	if err != nil {
		return err
	}
	start := time.Now()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			d := filepath.Join(dir, n)
			_ = os.RemoveAll(d)
			_, errs[i] = testenv.Start(context.Background(), testenv.Options{Name: n, Dir: d, BinDir: bin, Detach: true, AuditLog: audit})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = down(dir, io.Discard)
		return err
	}
	for _, n := range names {
		fmt.Fprintf(stdout, "%s: %s\n", n, filepath.Join(dir, n, "kubeconfig"))
	}
	fmt.Fprintf(stdout, "%d control plane(s) ready in %s; stop them with: devclusters down --dir %s\n", len(names), time.Since(start).Round(time.Millisecond), dir)
	return nil
}

func down(dir string, stdout io.Writer) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	total := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n, err := testenv.StopDetached(filepath.Join(dir, e.Name()), 10*time.Second)
		if err != nil {
			return err
		}
		total += n
	}
	fmt.Fprintf(stdout, "stopped %d process(es) started in %s\n", total, dir)
	return nil
}
