package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// NodeOptions give a control plane a node: containerd (Debian's 1.6, with runc and the
// CNI plugins), a kubelet and kube-proxy (scripts/node.sh builds them), in a network
// namespace of their own linked to the host, so that Pods run for real and reach the
// API server through the kubernetes Service.
type NodeOptions struct {
	// BinDir holds kubelet, kube-proxy, kube-scheduler and pause (scripts/node.sh).
	BinDir string
	// Images are imported into the node's containerd before the kubelet starts: Pods use
	// them without a pull (an image named :latest needs imagePullPolicy IfNotPresent).
	Images []NodeImage
	// ReadyTimeout bounds the wait for the Node to be Ready (default 2m).
	ReadyTimeout time.Duration
}

// Node is a kubelet joined to a control plane, with its container runtime and kube-proxy.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds containerd's, the kubelet's and kube-proxy's state and configuration.
	Dir string

	binDir                         string
	containerd, kubelet, kubeProxy *process
}

// NodeName is the name of the Node of control plane cp.
func NodeName(cp string) string { return cp + "-node" }

func (n *Node) socket() string { return filepath.Join(n.Dir, "containerd", "containerd.sock") }

func (n *Node) processes() []*process { return []*process{n.containerd, n.kubelet, n.kubeProxy} }

// startNode starts containerd, imports the images, starts the kubelet and kube-proxy and
// waits until the Node is Ready. The host is already claimed and its network made.
func (cp *ControlPlane) startNode(ctx context.Context, o *NodeOptions, detach bool) error {
	n := &Node{Name: NodeName(cp.Name), Dir: filepath.Join(cp.Dir, "node"), binDir: o.BinDir}
	cp.node = n
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet", "pki"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := n.writeConfigs(cp); err != nil {
		return err
	}
	logs := filepath.Join(cp.Dir, "logs")
	ns := netnsPath()
	n.containerd = &process{name: "containerd", path: lookPath("containerd"), logPath: filepath.Join(logs, "containerd.log"), detach: detach, netns: ns,
		args: []string{"--config", filepath.Join(n.Dir, "containerd", "config.toml")}}
	n.kubelet = &process{name: "kubelet", path: filepath.Join(o.BinDir, "kubelet"), logPath: filepath.Join(logs, "kubelet.log"), detach: detach, netns: ns,
		args: []string{
			"--config=" + filepath.Join(n.Dir, "kubelet.yaml"), "--kubeconfig=" + filepath.Join(n.Dir, "kubelet.kubeconfig"),
			"--root-dir=" + filepath.Join(n.Dir, "kubelet"), "--hostname-override=" + n.Name, "--node-ip=" + nodeIP, "--v=1",
		}}
	n.kubeProxy = &process{name: "kube-proxy", path: filepath.Join(o.BinDir, "kube-proxy"), logPath: filepath.Join(logs, "kube-proxy.log"), detach: detach, netns: ns,
		args: []string{"--config=" + filepath.Join(n.Dir, "kube-proxy.yaml"), "--v=1"}}
	if err := n.containerd.start(); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	if err := n.importImages(o.Images); err != nil {
		return err
	}
	for _, p := range []*process{n.kubelet, n.kubeProxy} {
		if err := p.start(); err != nil {
			return err
		}
	}
	// Recorded even when not detached: the next node on this machine checks that none runs.
	if err := writePIDs(n.Dir, n.processes()); err != nil {
		return err
	}
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	return cp.waitNodeReady(ctx, timeout)
}

func lookPath(bin string) string {
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	return bin
}

// waitContainerd waits until containerd answers on its socket.
func (n *Node) waitContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if n.containerd.exited() {
			return fmt.Errorf("testenv: containerd exited: %v\n%s", n.containerd.err, n.containerd.logTail(20))
		}
		if c, err := net.Dial("unix", n.socket()); err == nil {
			_ = c.Close() // only the answer was wanted
			if run("ctr", "--address", n.socket(), "version") == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: containerd did not answer: %w\n%s", ctx.Err(), n.containerd.logTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitNodeReady watches the Node until it is Ready.
func (cp *ControlPlane) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", cp.node.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return cs.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
		for _, p := range cp.node.processes() {
			if p.exited() {
				return false, fmt.Errorf("testenv: %s exited: %v\n%s", p.name, p.err, p.logTail(20))
			}
		}
		node, ok := ev.Object.(*corev1.Node)
		if !ok {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("testenv: node %s not Ready: %w\n%s", cp.node.Name, err, cp.Logs(20))
	}
	return nil
}

// stop stops the node: the kubelet and kube-proxy, then every container (through
// containerd, so that its shims exit cleanly), then containerd; then it sweeps what is
// left on the machine and restores the kernel settings.
func (n *Node) stop() error {
	for _, p := range []*process{n.kubelet, n.kubeProxy} {
		if p != nil {
			p.stop()
		}
	}
	if n.containerd != nil && !n.containerd.exited() {
		n.removeContainers()
		n.containerd.stop()
	}
	return n.release()
}

// release sweeps the machine after the node's processes are gone.
func (n *Node) release() error {
	errs := sweepNode(n.Dir)
	errs = append(errs, releaseNodeHost(n.Dir))
	return errors.Join(errs...)
}

// removeContainers kills and deletes every task and container of the CRI's namespace.
func (n *Node) removeContainers() {
	ctr := func(args ...string) string {
		out, _ := exec.Command("ctr", append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...).Output()
		return string(out)
	}
	ids := strings.Fields(ctr("containers", "list", "--quiet"))
	for _, id := range ids {
		ctr("tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		ctr("tasks", "delete", "--force", id)
	}
	for _, id := range ids {
		ctr("containers", "delete", id)
	}
}

// stopDetachedNode stops the node of the control plane in dir that a detached Start
// left running, and sweeps the machine.
func stopDetachedNode(dir string, grace time.Duration) (int, error) {
	n := &Node{Dir: filepath.Join(dir, "node")}
	if _, err := os.Stat(n.Dir); err != nil {
		return 0, nil //nolint:nilerr // no node
	}
	stopped := 0
	pids, err := readPIDs(n.Dir)
	if err != nil {
		return 0, err
	}
	var containerd *pidEntry
	for i := len(pids) - 1; i >= 0; i-- {
		e := pids[i]
		if e.name == "containerd" {
			containerd = &pids[i]
			continue
		}
		if runs(e.pid, e.path) {
			stopPID(e.pid, e.path, grace)
			stopped++
		}
	}
	if containerd != nil && runs(containerd.pid, containerd.path) {
		n.removeContainers()
		stopPID(containerd.pid, containerd.path, grace)
		stopped++
	}
	_ = os.Remove(filepath.Join(n.Dir, pidFile))
	return stopped, n.release()
}

// Node returns the control plane's node, or nil.
func (cp *ControlPlane) Node() *Node { return cp.node }

// PodProcesses returns the PIDs of every process of the Pod with UID uid on this node
// (its sandbox and containers), read from the kubelet's cgroups of that Pod.
func (n *Node) PodProcesses(uid string) []int {
	var out []int
	root := filepath.Join("/sys/fs/cgroup/pids", nodeCgroup)
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || !strings.Contains(p, "/pod"+uid) {
			return nil //nolint:nilerr // only the Pod's cgroups are read
		}
		data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out
}

// SignalPod sends sig to every process of the Pod with UID uid on this node (SIGSTOP
// freezes a Pod in place, as a hung process or a partitioned node would leave it).
func (n *Node) SignalPod(uid string, sig syscall.Signal) error {
	pids := n.PodProcesses(uid)
	if len(pids) == 0 {
		return fmt.Errorf("testenv: no process of Pod %s on node %s", uid, n.Name)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("testenv: signalling PID %d of Pod %s: %w", pid, uid, err)
		}
	}
	return nil
}
