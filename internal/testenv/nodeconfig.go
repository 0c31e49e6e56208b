package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// containerdConfig is containerd 1.6's configuration for a node: every path under the
// node's directory, nothing listening on the network but the CRI's streaming server on
// loopback (inside the node's network namespace), runc with cgroupfs, the CNI plugins of
// Debian's package, and the locally built pause image as the sandbox image.
const containerdConfig = `version = 2
root = "{{dir}}/containerd/root"
state = "{{dir}}/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{dir}}/containerd/containerd.sock"

[ttrpc]
  address = "{{dir}}/containerd/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  restrict_oom_score_adj = {{restrictoom}}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{{runc}}"
        Root = "{{dir}}/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{cnibin}}"
    conf_dir = "{{dir}}/cni/net.d"
    max_conf_num = 1
`

// cniConfig is the Pods' network: a bridge in the node's network namespace, addresses
// from PodCIDR (allocations kept under the node's directory), the bridge their gateway.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "{{network}}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{podcidr}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "{{dir}}/cni/ipam"
      }
    }
  ]
}
`

// kubeletConfig: cgroup v1 with cgroupfs (failCgroupV1: false), every Pod cgroup under
// nodeCgroup, no read-only port, webhook authentication and authorization (the API
// server's client certificate for logs and exec), eviction thresholds low enough for a
// shared disk, and no kernel setting protected (the kubelet sets its tunables, which the
// node's cleanup restores).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{nodeip}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://{{dir}}/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /{{cgroup}}
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
podLogsDir: {{dir}}/pod-logs
tlsCertFile: {{dir}}/pki/kubelet.crt
tlsPrivateKeyFile: {{dir}}/pki/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{ca}}
authorization:
  mode: Webhook
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
serializeImagePulls: false
protectKernelDefaults: false
maxPods: 30
oomScoreAdj: {{oomscore}}
`

// kubeProxyConfig: iptables mode inside the node's network namespace; no machine-wide
// conntrack settings and no route_localnet (localhost NodePorts) are changed.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{dir}}/kube-proxy.kubeconfig
hostnameOverride: {{node}}
mode: iptables
clusterCIDR: {{podcidr}}
bindAddress: {{nodeip}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["{{nodeip}}/32"]
iptables:
  localhostNodePorts: false
oomScoreAdj: {{oomscore}}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// capSysResource is CAP_SYS_RESOURCE's bit.
const capSysResource = 24

// hasCapability reports whether this process has capability bit in its effective set.
func hasCapability(bit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

func expand(tmpl string, vars map[string]string) string {
	for k, v := range vars {
		tmpl = strings.ReplaceAll(tmpl, "{{"+k+"}}", v)
	}
	return tmpl
}

// writeConfigs writes containerd's, the CNI's, the kubelet's and kube-proxy's
// configuration, their kubeconfigs and the kubelet's serving certificate.
func (n *Node) writeConfigs(cp *ControlPlane) error {
	vars := map[string]string{
		"dir": n.Dir, "pause": PauseImage, "runc": lookPath("runc"), "cnibin": "/usr/lib/cni",
		"network": nodeCNINetwork, "podcidr": PodCIDR, "nodeip": nodeIP, "cgroup": nodeCgroup,
		"ca": filepath.Join(cp.Dir, "pki", "ca.crt"), "node": n.Name,
		"restrictoom": "false", "oomscore": "-999",
	}
	// Lowering an OOM score needs CAP_SYS_RESOURCE, which root lacks on some machines
	// (this project's among them): the kubelet's -998 for a sandbox then fails every Pod
	// ("failed to update /proc/self/oom_score_adj: Permission denied").
	if !hasCapability(capSysResource) {
		vars["restrictoom"], vars["oomscore"] = "true", "0"
	}
	crt, key, err := cp.CA.Issue(n.Name, nil, []net.IP{net.ParseIP(nodeIP)}, []string{n.Name})
	if err != nil {
		return err
	}
	kubelet, err := cp.UserConfig("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	proxy, err := cp.UserConfig("system:kube-proxy")
	if err != nil {
		return err
	}
	files := map[string]string{
		"containerd/config.toml":                       expand(containerdConfig, vars),
		"cni/net.d/10-" + nodeCNINetwork + ".conflist": expand(cniConfig, vars),
		"kubelet.yaml":                                 expand(kubeletConfig, vars),
		"kube-proxy.yaml":                              expand(kubeProxyConfig, vars),
		"pki/kubelet.crt":                              string(crt),
		"pki/kubelet.key":                              string(key),
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, f), []byte(data), 0o600); err != nil {
			return fmt.Errorf("testenv: node configuration: %w", err)
		}
	}
	if err := WriteKubeconfig(filepath.Join(n.Dir, "kubelet.kubeconfig"), cp.Name, kubelet); err != nil {
		return err
	}
	return WriteKubeconfig(filepath.Join(n.Dir, "kube-proxy.kubeconfig"), cp.Name, proxy)
}
