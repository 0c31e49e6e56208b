package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// controllers are the kube-controller-manager controllers a control plane runs: CSR
// signing and cleaning, namespace deletion and garbage collection.
func controllers() []string {
	return []string{
		"certificatesigningrequest-signing-controller", "certificatesigningrequest-cleaner-controller",
		"namespace-controller", "garbage-collector-controller",
	}
}

// controllersForNode are the controllers a control plane with a node runs besides:
// Deployments and their ReplicaSets, ServiceAccounts and the root CA ConfigMap every
// Pod's token volume needs, Endpoints and EndpointSlices, PodDisruptionBudgets, the
// node's lifecycle (taints, evictions of a Node that went away) and Pod garbage collection.
func controllersForNode() []string {
	return []string{
		"deployment-controller", "replicaset-controller", "serviceaccount-controller",
		"root-ca-certificate-publisher-controller", "endpoints-controller", "endpointslice-controller",
		"endpointslice-mirroring-controller", "disruption-controller", "node-lifecycle-controller",
		"taint-eviction-controller", "pod-garbage-collector-controller", "ttl-controller",
	}
}

// Options configure one control plane.
type Options struct {
	// Name names the control plane in kubeconfigs and logs.
	Name string
	// Dir holds PKI, etcd data, kubeconfigs and logs (dir/logs). It is created if needed.
	Dir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// Detach lets the processes outlive the caller (devclusters); their PIDs are written
	// to Dir/pids for StopDetached.
	Detach bool
	// ReadyTimeout bounds the wait for the API server to be ready (default 60s).
	ReadyTimeout time.Duration
	// AuditLog makes the API server write an audit event (level Metadata, stage
	// ResponseComplete) for each request to AuditLogPath: who asked what, when, and how
	// long it took. It costs the API server CPU: benchmarks of throughput leave it off.
	AuditLog bool
	// PriorityAndFairness runs the API server with API priority and fairness, as
	// Kubernetes does by default. It is off otherwise (the max-in-flight limits decide):
	// every control plane would pay for its configuration objects and queues, and the
	// benchmark's history was measured without it. Tests and benchmarks that are about it
	// turn it on.
	PriorityAndFairness bool
	// Node, when set, gives the control plane a node (NodeOptions): the API server then
	// binds NodeHostIP instead of 127.0.0.1 (Pods reach it there, through the kubernetes
	// Service), authorizes kubelets (Node, RBAC), and the control plane also runs
	// kube-scheduler and the controllers workloads need (controllersForNode). One node
	// runs on a machine at a time, and it needs root.
	Node *NodeOptions
}

// AuditLogPath is where a control plane started with Options.AuditLog writes its audit
// events, one JSON object per line.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.Dir, "logs", "audit.log") }

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/metrics", "/version"]
- level: Metadata
`

// ControlPlane is a running etcd + kube-apiserver + kube-controller-manager.
type ControlPlane struct {
	// Name of the control plane.
	Name string
	// Dir holds everything the control plane writes.
	Dir string
	// URL is the API server URL (https://127.0.0.1:<port>).
	URL string
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// CA is the client and signing CA.
	CA *CA

	etcd, apiserver, kcm, scheduler *process
	node                            *Node
}

type ports struct{ etcdClient, etcdPeer, apiserver int }

// Start launches a control plane and waits until its API server is ready. On error,
// everything started is stopped again.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	if o.Name == "" || o.Dir == "" || o.BinDir == "" {
		return nil, errors.New("testenv: Name, Dir and BinDir are required")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "pki"), filepath.Join(o.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	host := "127.0.0.1"
	if o.Node != nil {
		host = NodeHostIP
	}
	ca, err := writePKI(filepath.Join(o.Dir, "pki"), o.Name, net.ParseIP(host))
	if err != nil {
		return nil, fmt.Errorf("testenv: creating PKI: %w", err)
	}
	if o.Node != nil {
		if err := prepareNodeHost(filepath.Join(o.Dir, "node")); err != nil {
			return nil, err
		}
	}
	var lastErr error
	// A port picked as free may be taken before a server binds it; try again with others.
	for attempt := 0; attempt < 3; attempt++ {
		cp, err := startOnce(ctx, o, ca, host)
		if err == nil {
			return cp, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if o.Node != nil {
		lastErr = errors.Join(lastErr, (&Node{Dir: filepath.Join(o.Dir, "node")}).release())
	}
	return nil, lastErr
}

// prepareNodeHost claims the machine for a node in dir and makes its network and
// cgroups; on error, it removes what it made.
func prepareNodeHost(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := claimNodeHost(dir); err != nil {
		return err
	}
	err := setupNodeNetwork()
	if err == nil {
		err = setupNodeCgroups()
	}
	if err != nil {
		return errors.Join(err, (&Node{Dir: dir}).release())
	}
	return nil
}

func startOnce(ctx context.Context, o Options, ca *CA, host string) (*ControlPlane, error) {
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Name: o.Name, Dir: o.Dir, CA: ca, URL: fmt.Sprintf("https://%s:%d", host, p.apiserver)}
	if err := cp.writeKubeconfigs(); err != nil {
		return nil, err
	}
	if err := cp.makeProcesses(o, p); err != nil {
		return nil, err
	}
	if err := cp.startServers(ctx, o); err != nil {
		return nil, err
	}
	if o.Node != nil {
		if err := cp.startNode(ctx, o.Node, o.Detach); err != nil {
			logs := cp.Logs(20)
			cp.Stop()
			_ = os.Remove(filepath.Join(o.Dir, pidFile))
			return nil, fmt.Errorf("%w\n%s", err, logs)
		}
	}
	return cp, nil
}

// makeProcesses prepares the control plane's processes and what they read.
func (cp *ControlPlane) makeProcesses(o Options, p ports) error {
	pki, logs := filepath.Join(o.Dir, "pki"), filepath.Join(o.Dir, "logs")
	bin := func(n string) string { return filepath.Join(o.BinDir, n) }
	cp.etcd = &process{name: "etcd", path: bin("etcd"), logPath: filepath.Join(logs, "etcd.log"), detach: o.Detach, args: etcdArgs(o.Dir, p)}
	apiArgs := apiserverArgs(pki, p)
	if o.PriorityAndFairness {
		apiArgs = slices.DeleteFunc(apiArgs, func(a string) bool { return strings.HasPrefix(a, "--enable-priority-and-fairness=") })
	}
	kcm := kcmArgs(pki, filepath.Join(o.Dir, "controller-manager.kubeconfig"))
	if o.Node != nil {
		if err := cp.writeNodeClients(); err != nil {
			return err
		}
		apiArgs = apiserverArgsForNode(apiArgs, pki)
		kcm = kcmArgsForNode(kcm, pki)
		cp.scheduler = &process{name: "kube-scheduler", path: filepath.Join(o.Node.BinDir, "kube-scheduler"), logPath: filepath.Join(logs, "kube-scheduler.log"), detach: o.Detach,
			args: []string{"--kubeconfig=" + filepath.Join(o.Dir, "scheduler.kubeconfig"), "--leader-elect=false", "--secure-port=0", "--v=0"}}
	}
	if o.AuditLog {
		policy := filepath.Join(o.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return err
		}
		apiArgs = append(apiArgs, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath(), "--audit-log-format=json")
	}
	cp.apiserver = &process{name: "kube-apiserver", path: bin("kube-apiserver"), logPath: filepath.Join(logs, "kube-apiserver.log"), detach: o.Detach, args: apiArgs}
	cp.kcm = &process{name: "kube-controller-manager", path: bin("kube-controller-manager"), logPath: filepath.Join(logs, "kube-controller-manager.log"), detach: o.Detach,
		args: kcm}
	return nil
}

// startServers starts etcd and the API server, waits until it is ready, then starts the
// controller manager (and the scheduler); a detached control plane records their PIDs.
func (cp *ControlPlane) startServers(ctx context.Context, o Options) error {
	// kube-controller-manager starts once the API server is ready: it gives up after a
	// few seconds of an unhealthy API server, which a loaded machine starting several
	// control planes at once can take.
	for _, pr := range []*process{cp.etcd, cp.apiserver} {
		if err := pr.start(); err != nil {
			cp.Stop()
			return err
		}
	}
	if err := cp.waitReady(ctx, o.ReadyTimeout); err != nil {
		cp.Stop()
		return err
	}
	for _, pr := range []*process{cp.kcm, cp.scheduler} {
		if pr == nil {
			continue
		}
		if err := pr.start(); err != nil {
			cp.stopServers()
			return err
		}
	}
	if o.Detach {
		if err := writePIDs(o.Dir, cp.processes()); err != nil {
			cp.stopServers()
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) processes() []*process {
	out := []*process{cp.etcd, cp.apiserver, cp.kcm}
	if cp.scheduler != nil {
		out = append(out, cp.scheduler)
	}
	return out
}

// allProcesses are the control plane's processes and its node's.
func (cp *ControlPlane) allProcesses() []*process {
	out := cp.processes()
	if cp.node != nil {
		out = append(out, cp.node.processes()...)
	}
	return out
}

// PIDs returns the PIDs of the running server processes.
func (cp *ControlPlane) PIDs() []int {
	var out []int
	for _, p := range cp.allProcesses() {
		if pid, ok := p.pid(); ok {
			out = append(out, pid)
		}
	}
	return out
}

// ProcessIDs maps the name of each running server process (etcd, kube-apiserver,
// kube-controller-manager) to its PID.
func (cp *ControlPlane) ProcessIDs() map[string]int {
	out := map[string]int{}
	for _, p := range cp.allProcesses() {
		if pid, ok := p.pid(); ok {
			out[p.name] = pid
		}
	}
	return out
}

// Stop terminates the node, if any (and removes what it left on the machine), then the
// scheduler, the controller manager, the API server and etcd, in that order.
func (cp *ControlPlane) Stop() {
	_ = cp.StopNode() // best effort: Stop reports nothing
	cp.stopServers()
}

// StopNode stops the control plane's node, if any, and removes everything it left on the
// machine: containers, mounts, cgroups, its network namespace and link; it restores the
// kernel settings the kubelet changed.
func (cp *ControlPlane) StopNode() error {
	if cp.node == nil {
		return nil
	}
	err := cp.node.stop()
	cp.node = nil
	return err
}

func (cp *ControlPlane) stopServers() {
	for _, p := range []*process{cp.scheduler, cp.kcm, cp.apiserver, cp.etcd} {
		if p != nil {
			p.stop()
		}
	}
}

// StopAPIServer stops only the API server, as in an outage.
func (cp *ControlPlane) StopAPIServer() { cp.apiserver.stop() }

// StartAPIServer starts the API server again on the same port and waits for readiness.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if !cp.apiserver.exited() {
		return errors.New("testenv: the API server is running")
	}
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	return cp.waitReady(ctx, 60*time.Second)
}

// Logs returns the tail of each server log, for failure reports.
func (cp *ControlPlane) Logs(lines int) string {
	var b strings.Builder
	for _, p := range cp.allProcesses() {
		if p != nil {
			fmt.Fprintf(&b, "==> %s/%s (%s) <==\n%s\n", cp.Name, p.name, p.logPath, p.logTail(lines))
		}
	}
	return b.String()
}

func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr, err := rest.TransportFor(cp.Config)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	for {
		for _, p := range []*process{cp.etcd, cp.apiserver} {
			if p.exited() {
				return fmt.Errorf("testenv: %s of %s exited before the API server was ready: %v\n%s", p.name, cp.Name, p.err, p.logTail(15))
			}
		}
		if resp, err := client.Get(cp.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: API server of %s not ready: %w\n%s", cp.Name, ctx.Err(), cp.Logs(15))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) writeKubeconfigs() error {
	cfg, err := cp.UserConfig("admin", "system:masters")
	if err != nil {
		return err
	}
	cp.Config = cfg
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if writeKubeconfigErr := WriteKubeconfig(cp.Kubeconfig, cp.Name, cfg); writeKubeconfigErr != nil {
		return writeKubeconfigErr
	}
	kcm, err := cp.UserConfig("system:kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	return WriteKubeconfig(filepath.Join(cp.Dir, "controller-manager.kubeconfig"), cp.Name, kcm)
}

// writeNodeClients writes the scheduler's kubeconfig and the API server's client
// certificate for kubelets.
func (cp *ControlPlane) writeNodeClients() error {
	sched, err := cp.UserConfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	if writeErr := WriteKubeconfig(filepath.Join(cp.Dir, "scheduler.kubeconfig"), cp.Name, sched); writeErr != nil {
		return writeErr
	}
	crt, key, err := cp.CA.Issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	pki := filepath.Join(cp.Dir, "pki")
	if err := os.WriteFile(filepath.Join(pki, "kubelet-client.crt"), crt, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pki, "kubelet-client.key"), key, 0o600)
}

// UserConfig mints a client certificate for user in groups, signed by the control
// plane's CA, and returns a client configuration that authenticates with it.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	crt, key, err := cp.CA.Issue(user, groups, nil, nil)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: cp.URL, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA.CertPEM, CertData: crt, KeyData: key},
	}, nil
}

// ServiceAccountConfig mints a token for ServiceAccount ns/name (TokenRequest, valid for
// an hour) and returns a client configuration that authenticates with it: exactly what a
// Pod running as that ServiceAccount holds.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("testenv: minting a token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	return &rest.Config{Host: cp.URL, QPS: 200, Burst: 400, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA.CertPEM}}, nil
}

// WriteKubeconfig writes a kubeconfig file for a client configuration with embedded
// certificates; the cluster, user and context are all called name.
func WriteKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}

func freePorts() (ports, error) {
	var got [3]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close() // only its port was wanted
		}
	}()
	for i := range got {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, err
		}
		ls = append(ls, l)
		got[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{etcdClient: got[0], etcdPeer: got[1], apiserver: got[2]}, nil
}

func etcdArgs(dir string, p ports) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(p.etcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.etcdPeer)
	return []string{
		"--name=default", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer, "--initial-cluster-state=new",
		"--unsafe-no-fsync", "--log-level=error", "--quota-backend-bytes=2147483648",
	}
}

func apiserverArgs(pki string, p ports) []string {
	f := func(n string) string { return filepath.Join(pki, n) }
	return []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.etcdClient),
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(p.apiserver),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--tls-cert-file=" + f("apiserver.crt"), "--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"), "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"), "--service-cluster-ip-range=10.0.0.0/24",
		"--enable-priority-and-fairness=false", "--profiling=true", "--v=0",
	}
}

// apiserverArgsForNode binds and advertises NodeHostIP (the kubernetes Service's
// endpoint, kept by the API server's lease reconciler), authorizes kubelets as Nodes and
// reaches them with a client certificate.
func apiserverArgsForNode(args []string, pki string) []string {
	out := make([]string, 0, len(args)+6)
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--bind-address="), strings.HasPrefix(a, "--advertise-address="),
			strings.HasPrefix(a, "--endpoint-reconciler-type="), strings.HasPrefix(a, "--authorization-mode="):
			continue
		}
		out = append(out, a)
	}
	return append(out, "--bind-address="+NodeHostIP, "--advertise-address="+NodeHostIP, "--endpoint-reconciler-type=lease",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+filepath.Join(pki, "kubelet-client.crt"), "--kubelet-client-key="+filepath.Join(pki, "kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP")
}

// kcmArgsForNode runs controllersForNode too, and publishes the root CA Pods trust.
func kcmArgsForNode(args []string, pki string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if strings.HasPrefix(a, "--controllers=") {
			a = "--controllers=" + strings.Join(append(controllers(), controllersForNode()...), ",")
		}
		out = append(out, a)
	}
	return append(out, "--root-ca-file="+filepath.Join(pki, "ca.crt"))
}

func kcmArgs(pki, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig, "--controllers=" + strings.Join(controllers(), ","),
		"--cluster-signing-cert-file=" + filepath.Join(pki, "ca.crt"), "--cluster-signing-key-file=" + filepath.Join(pki, "ca.key"),
		"--leader-elect=false", "--secure-port=0", "--kube-api-qps=200", "--kube-api-burst=400",
		"--controller-start-interval=0", "--v=0",
	}
}
