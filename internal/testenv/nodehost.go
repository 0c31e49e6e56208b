package testenv

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a node changes on the machine, all named here so that a cleanup finds everything
// from these names alone, even after the process that started the node was killed. One
// node runs on a machine at a time (nodeMarker says which).
const (
	// nodeNetNS is the network namespace containerd, the kubelet and kube-proxy run in:
	// their bridge, iptables rules and network sysctls stay in it, and go with it.
	nodeNetNS = "liqo-auth-node"
	// nodeHostVeth is the host's end of the link into nodeNetNS (the node's end is eth0).
	nodeHostVeth = "liqo-auth-node"
	// NodeHostIP is the host's address on that link: the API server of a control plane
	// with a node binds it (instead of 127.0.0.1), so that Pods reach it.
	NodeHostIP = "10.250.255.1"
	// nodeIP is the node's address on that link (its InternalIP).
	nodeIP = "10.250.255.2"
	// nodeLinkBits is the prefix length of the link.
	nodeLinkBits = 30
	// PodCIDR is the Pods' subnet, on a bridge inside nodeNetNS; the host routes it to nodeIP.
	PodCIDR = "10.250.0.0/24"
	// nodeCgroup is the cgroup under which the kubelet makes its Pods' cgroups, in each
	// cgroup v1 hierarchy (the kubelet's cgroupRoot).
	nodeCgroup = "liqo-auth-node"
	// nodeCNINetwork names the CNI network (and prefixes its cached results).
	nodeCNINetwork = "liqo-auth-node"
	// cniResultsDir is where libcni caches results, machine-wide; containerd offers no
	// other place. Entries of nodeCNINetwork are removed at cleanup.
	cniResultsDir = "/var/lib/cni/results"
	// containerLogsDir is where the kubelet links container logs, machine-wide; links into
	// a node's directory are removed at cleanup.
	containerLogsDir = "/var/log/containers"
)

// nodeMarker records the node that runs on this machine: its directory and the kernel
// settings the kubelet changes, as they were before. It lives in /run, which a reboot
// empties, as it does every other trace of a node.
var nodeMarker = "/run/liqo-auth/node.json"

// kubeletSysctls are the machine-wide kernel settings the kubelet sets at start (its
// "kernel tunables"; protectKernelDefaults would make it refuse to start instead): they
// are recorded before and restored at cleanup.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

type nodeMarkerData struct {
	// Dir is the node's directory.
	Dir string `json:"dir"`
	// Sysctls are kubeletSysctls as they were before the first node.
	Sysctls map[string]string `json:"sysctls"`
}

// claimNodeHost makes sure no other node runs on this machine, removes what a node
// whose process was killed left, records the kernel settings and writes the marker
// for dir.
func claimNodeHost(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("testenv: a node needs root (containerd, the kubelet, a network namespace)")
	}
	prev, err := readNodeMarker()
	if err != nil {
		return err
	}
	sysctls := map[string]string{}
	if prev != nil {
		if pid, running := nodeRunning(prev.Dir); running {
			return fmt.Errorf("testenv: a node already runs on this machine (PID %d, from %s): stop it first (devclusters down)", pid, prev.Dir)
		}
		sweepNode(prev.Dir)
		sysctls = prev.Sysctls
	} else {
		for _, k := range kubeletSysctls {
			v, readErr := os.ReadFile(filepath.Join("/proc/sys", k))
			if readErr != nil {
				return readErr
			}
			sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	return writeNodeMarker(&nodeMarkerData{Dir: dir, Sysctls: sysctls})
}

func readNodeMarker() (*nodeMarkerData, error) {
	data, err := os.ReadFile(nodeMarker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m nodeMarkerData
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", nodeMarker, err)
	}
	return &m, nil
}

func writeNodeMarker(m *nodeMarkerData) error {
	if err := os.MkdirAll(filepath.Dir(nodeMarker), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(nodeMarker, data, 0o600)
}

// nodeRunning reports whether a process recorded in dir's PID file still runs.
func nodeRunning(dir string) (int, bool) {
	pids, _ := readPIDs(dir)
	for _, e := range pids {
		if runs(e.pid, e.path) {
			return e.pid, true
		}
	}
	return 0, false
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNodeNetwork makes the node's network namespace and its link to the host: the
// host's end holds NodeHostIP and a route to PodCIDR through the node; the node forwards
// (in its own namespace only) between its Pods' bridge and the link.
func setupNodeNetwork() error {
	inNS := func(args ...string) []string { return append([]string{"-n", nodeNetNS}, args...) }
	link := fmt.Sprintf("/%d", nodeLinkBits)
	steps := [][]string{
		{"netns", "add", nodeNetNS},
		{"link", "add", nodeHostVeth, "type", "veth", "peer", "name", "eth0", "netns", nodeNetNS},
		{"addr", "add", NodeHostIP + link, "dev", nodeHostVeth},
		{"link", "set", nodeHostVeth, "up"},
		inNS("link", "set", "lo", "up"),
		inNS("addr", "add", nodeIP+link, "dev", "eth0"),
		inNS("link", "set", "eth0", "up"),
		inNS("route", "add", "default", "via", NodeHostIP),
		{"route", "add", PodCIDR, "via", nodeIP, "dev", nodeHostVeth},
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return fmt.Errorf("testenv: node network: %w", err)
		}
	}
	// /proc/sys/net shows the namespace of the process that opens it.
	if err := run("nsenter", "--net="+netnsPath(), "--", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"); err != nil {
		return fmt.Errorf("testenv: node network: %w", err)
	}
	return nil
}

func netnsPath() string { return filepath.Join("/run/netns", nodeNetNS) }

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers, the named
// systemd one and the unified one).
func cgroupHierarchies() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// setupNodeCgroups makes the kubelet's cgroup root in every hierarchy (it must exist);
// a cpuset cgroup gets its parent's CPUs and memory nodes, without which nothing can join it.
func setupNodeCgroups() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, nodeCgroup)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("testenv: node cgroup: %w", err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
				return fmt.Errorf("testenv: node cgroup: %w", err)
			}
		}
	}
	return nil
}

// sweepNode removes whatever a node whose directory is dir left on the machine, after
// its processes were stopped or killed: the processes still in its cgroups or network
// namespace (containers, containerd's shims), the mounts under dir (container root
// file systems, Pod volumes, network namespaces), its cgroups, its network namespace with
// everything in it (bridge, iptables rules), the host's end of its link, libcni's cached
// results of its network, the kubelet's links to its logs, and the kernel settings the
// kubelet changed. Each step is best effort: what fails is reported, the rest goes on.
func sweepNode(dir string) []error {
	killNodeStragglers()
	var errs []error
	if dir != "" {
		errs = append(errs, unmountUnder(dir)...)
	}
	errs = append(errs, removeNodeCgroups()...)
	errs = append(errs, removeNodeNetwork()...)
	removeHostTraces(dir)
	return errs
}

// killNodeStragglers kills what runs in the node's cgroups or network namespace.
func killNodeStragglers() {
	for i := 0; i < 3; i++ {
		pids := nodeStragglers()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeNodeNetwork deletes the node's network namespace (its bridge, veths and iptables
// rules go with it) and the host's end of its link.
func removeNodeNetwork() []error {
	var errs []error
	if _, err := os.Stat(netnsPath()); err == nil {
		if err := run("ip", "netns", "delete", nodeNetNS); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", nodeHostVeth)); err == nil {
		if err := run("ip", "link", "delete", nodeHostVeth); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// removeHostTraces removes what containerd, libcni and the kubelet write in machine-wide
// directories for the node in dir: libcni's cached results of the node's network and of
// each sandbox's loopback, the kubelet's links to container logs, and the empty
// directories containerd's shims make in containerd's default state directory whatever
// its configuration says (a containerd of the machine's own would keep something there).
func removeHostTraces(dir string) {
	prefixes := []string{nodeCNINetwork + "-"}
	if dir != "" {
		sandboxes, _ := os.ReadDir(filepath.Join(dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
		for _, s := range sandboxes {
			prefixes = append(prefixes, "cni-loopback-"+s.Name()+"-")
		}
	}
	entries, _ := os.ReadDir(cniResultsDir)
	for _, e := range entries {
		for _, p := range prefixes {
			if strings.HasPrefix(e.Name(), p) {
				_ = os.Remove(filepath.Join(cniResultsDir, e.Name()))
			}
		}
	}
	if dir != "" {
		links, _ := os.ReadDir(containerLogsDir)
		for _, e := range links {
			p := filepath.Join(containerLogsDir, e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
				_ = os.Remove(p)
			}
		}
	}
	for _, d := range []string{"/run/containerd/s", "/run/containerd/fifo", "/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd"} {
		_ = os.Remove(d) // only an empty directory goes
	}
}

// nodeStragglers are the processes in the node's cgroups or network namespace.
func nodeStragglers() []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, nodeCgroup), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil //nolint:nilerr // a cgroup that went away holds nobody
			}
			data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var ns syscall.Stat_t
	if err := syscall.Stat(netnsPath(), &ns); err == nil {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Ino == ns.Ino && st.Dev == ns.Dev {
				seen[pid] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) []error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []error{err}
	}
	defer func() { _ = f.Close() }() // read only
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errs
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeNodeCgroups removes the node's cgroups, deepest first, in every hierarchy.
func removeNodeCgroups() []error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, nodeCgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errs
}

// releaseNodeHost restores the kernel settings recorded by claimNodeHost and removes the
// marker, if it names dir.
func releaseNodeHost(dir string) error {
	m, err := readNodeMarker()
	if err != nil || m == nil || m.Dir != dir {
		return err
	}
	var errs []error
	for k, v := range m.Sysctls {
		p := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", k, err))
		}
	}
	if err := os.Remove(nodeMarker); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
