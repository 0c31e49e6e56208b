// Command devclusters starts and stops local Kubernetes control planes (etcd,
// kube-apiserver, kube-controller-manager) in the background, for demos, benchmarks and
// trying liqoctl by hand:
//
//	devclusters up --dir DIR NAME...   start one control plane per NAME; DIR/NAME/kubeconfig
//	devclusters up --dir DIR --with-node NAME [--node-image REF=OCI_LAYOUT]... NAME...
//	                                   the same, and NAME gets a real node (containerd, kubelet,
//	                                   kube-proxy) running Pods, with the images imported
//	devclusters down --dir DIR         stop exactly the processes started in DIR (and a node's
//	                                   containers, mounts, network namespace and cgroups)
//
// The binaries come from $LIQO_AUTH_CONTROLPLANE_DIR, or are built once by
// scripts/controlplane.sh; a node's from $LIQO_AUTH_NODE_DIR, or scripts/node.sh (which
// installs containerd, runc and the CNI plugins with apt-get, and needs root).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	withNode := fs.String("with-node", "", "up: the control plane NAME gets a node that runs Pods (root only; its API server listens on "+testenv.NodeHostIP+")")
	var images nodeImages
	fs.Var(&images, "node-image", "up: REF=OCI_LAYOUT, an image imported into the node's runtime under REF (repeatable), e.g. ghcr.io/liqo-auth/liqo-auth-manager:latest=dist/image")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(abs, fs.Args(), upOptions{audit: *audit, withNode: *withNode, images: images}, stdout)
	case "down":
		return down(abs, stdout)
	default:
		return fmt.Errorf("unknown command %q: use up or down", args[0])
	}
}

// validateUp checks up's arguments before anything starts.
func validateUp(dir string, names []string, o upOptions) error {
	if len(names) == 0 {
		return errors.New("name at least one control plane: devclusters up --dir DIR NAME...") //nolint:staticcheck // ST1005: the "..." is the usage's, not punctuation
	}
	if o.withNode != "" && !slices.Contains(names, o.withNode) {
		return fmt.Errorf("--with-node %s: not one of the control planes named (%s)", o.withNode, strings.Join(names, ", "))
	}
	if len(o.images) > 0 && o.withNode == "" {
		return errors.New("--node-image needs --with-node")
	}
	for _, n := range names {
		if err := cluster.ValidateClusterID(n); err != nil {
			return fmt.Errorf("name %q: %w", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, n, "pids")); err == nil {
			return fmt.Errorf("%s already runs in %s: run devclusters down --dir %s first", n, dir, dir)
		}
	}
	return nil
}

// nodeImages are --node-image flags: REF=OCI_LAYOUT each.
type nodeImages []testenv.NodeImage

func (n *nodeImages) String() string { return fmt.Sprint(*n) }

func (n *nodeImages) Set(v string) error {
	ref, dir, ok := strings.Cut(v, "=")
	if !ok || ref == "" || dir == "" {
		return fmt.Errorf("%q is not REF=OCI_LAYOUT", v)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	*n = append(*n, testenv.NodeImage{Name: ref, OCILayout: abs})
	return nil
}

type upOptions struct {
	audit    bool
	withNode string
	images   nodeImages
}

func up(dir string, names []string, o upOptions, stdout io.Writer) error {
	if err := validateUp(dir, names, o); err != nil {
		return err
	}
	bin, err := testenv.BinDir()
	if err != nil {
		return err
	}
	var node *testenv.NodeOptions
	if o.withNode != "" {
		nodeBin, err := testenv.NodeBinDir()
		if err != nil {
			return err
		}
		node = &testenv.NodeOptions{BinDir: nodeBin, Images: o.images}
	}
	start := time.Now()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			d := filepath.Join(dir, n)
			_ = os.RemoveAll(d)
			opts := testenv.Options{Name: n, Dir: d, BinDir: bin, Detach: true, AuditLog: o.audit}
			if n == o.withNode {
				opts.Node = node
			}
			_, errs[i] = testenv.Start(context.Background(), opts)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = down(dir, io.Discard)
		return err
	}
	for _, n := range names {
		fmt.Fprintf(stdout, "%s: %s\n", n, filepath.Join(dir, n, "kubeconfig"))
		if n == o.withNode {
			fmt.Fprintf(stdout, "%s: node %s Ready (Pods on %s)\n", n, testenv.NodeName(n), testenv.PodCIDR)
		}
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
