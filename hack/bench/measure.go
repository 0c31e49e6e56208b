package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// latency is the outcome of repeated rounds of one measurement.
type latency struct {
	name   string
	rounds []time.Duration
	// steps holds, per step line, its durations (time since the previous line).
	steps     map[string][]time.Duration
	stepOrder []string
	unauth    []time.Duration
}

var stepLine = regexp.MustCompile(`^(?:INFO|DEBUG) (\((?:local|remote)\) )?\[ *([0-9.]+)s\] (.*)$`)

// addSteps turns liqoctl -v output into per-step durations.
func (l *latency) addSteps(stderr string) {
	if l.steps == nil {
		l.steps = map[string][]time.Duration{}
	}
	prev := 0.0
	for _, line := range strings.Split(stderr, "\n") {
		m := stepLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[2], 64)
		msg := m[1] + m[3]
		if strings.HasPrefix(m[3], "No liqo-auth-manager") {
			msg = m[1] + "in-process controllers started"
		}
		if _, ok := l.steps[msg]; !ok {
			l.stepOrder = append(l.stepOrder, msg)
		}
		l.steps[msg] = append(l.steps[msg], time.Duration((at-prev)*float64(time.Second)))
		prev = at
	}
}

func (e *env) pairArgs(cmd string, extra ...string) []string {
	return append([]string{cmd, "--kubeconfig", e.consumer.Kubeconfig, "--remote-kubeconfig", e.provider.Kubeconfig}, extra...)
}

// Modes of the authenticate measurement.
const (
	modeInProcess   = "controllers in-process"
	modeManager     = "controllers manager"
	modePeeringUser = "peering user, controllers manager"
)

// authenticateRounds times liqoctl authenticate, as a process, in one mode: controllers
// in-process, a manager per cluster, or a manager per cluster with the provider reached
// through a peering user.
func (e *env) authenticateRounds(ctx context.Context, mode string) (*latency, error) {
	if mode != modeInProcess {
		for _, cp := range []*testenv.ControlPlane{e.consumer, e.provider} {
			m, err := e.startManager(cp)
			if err != nil {
				return nil, err
			}
			defer m.Stop()
		}
	}
	pair := e.pairArgs
	if mode == modePeeringUser {
		kubeconfig, _, err := e.liqoctlOut(ctx, "generate", "peering-user", "--kubeconfig", e.provider.Kubeconfig, "--consumer-cluster-id", "cl-consumer")
		if err != nil {
			return nil, err
		}
		path := filepath.Join(filepath.Dir(e.provider.Kubeconfig), "peering-user.kubeconfig")
		if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
			return nil, err
		}
		defer func() {
			_, _ = e.liqoctl(ctx, "delete", "peering-user", "--kubeconfig", e.provider.Kubeconfig, "--consumer-cluster-id", "cl-consumer")
		}()
		pair = func(cmd string, extra ...string) []string {
			return append([]string{cmd, "--kubeconfig", e.consumer.Kubeconfig, "--remote-kubeconfig", path}, extra...)
		}
	}
	l := &latency{name: "authenticate, " + mode}
	for i := 0; i < e.cfg.rounds; i++ {
		start := time.Now()
		stderr, err := e.liqoctl(ctx, pair("authenticate", "-v")...)
		if err != nil {
			return nil, err
		}
		l.rounds = append(l.rounds, time.Since(start))
		l.addSteps(stderr)
		log(fmt.Sprintf("  round %d: %s", i+1, ms(time.Since(start))))
		start = time.Now()
		if _, err := e.liqoctl(ctx, pair("unauthenticate")...); err != nil {
			return nil, err
		}
		l.unauth = append(l.unauth, time.Since(start))
	}
	return l, nil
}

// manualRounds scripts the four steps of the manual flow, with a manager per cluster.
func (e *env) manualRounds(ctx context.Context) (*latency, error) {
	for _, cp := range []*testenv.ControlPlane{e.consumer, e.provider} {
		m, err := e.startManager(cp)
		if err != nil {
			return nil, err
		}
		defer m.Stop()
	}
	cc, err := client.New(e.consumer.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	C, P := []string{"--kubeconfig", e.consumer.Kubeconfig}, []string{"--kubeconfig", e.provider.Kubeconfig}
	with := func(base []string, args ...string) []string { return append(args, base...) }
	l := &latency{name: "manual flow (4 steps, scripted)"}
	for i := 0; i < e.cfg.rounds; i++ {
		start := time.Now()
		if _, err := e.liqoctl(ctx, with(P, "create", "nonce", "--remote-cluster-id", "cl-consumer")...); err != nil {
			return nil, err
		}
		nonce, _, err := e.liqoctlOut(ctx, with(P, "get", "nonce", "--remote-cluster-id", "cl-consumer")...)
		if err != nil {
			return nil, err
		}
		tenant, _, err := e.liqoctlOut(ctx, with(C, "generate", "tenant", "--remote-cluster-id", "cl-provider", "--nonce", strings.TrimSpace(nonce))...)
		if err != nil {
			return nil, err
		}
		if applyYAMLErr := testenv.ApplyYAML(ctx, e.pc, []byte(tenant)); applyYAMLErr != nil {
			return nil, applyYAMLErr
		}
		identity, _, err := e.liqoctlOut(ctx, with(P, "generate", "identity", "--remote-cluster-id", "cl-consumer")...)
		if err != nil {
			return nil, err
		}
		if applyYAMLErr := testenv.ApplyYAML(ctx, cc, []byte(identity)); applyYAMLErr != nil {
			return nil, applyYAMLErr
		}
		key := client.ObjectKey{Namespace: wire.TenantNamespaceName("cl-provider"), Name: wire.IdentityName("cl-provider")}
		err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var id authv1beta1.Identity
			if getErr := cc.Get(ctx, key, &id); getErr != nil {
				return false, client.IgnoreNotFound(getErr)
			}
			return meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for the Identity: %w", err)
		}
		l.rounds = append(l.rounds, time.Since(start))
		if _, err := e.liqoctl(ctx, e.pairArgs("unauthenticate")...); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// scaleResult is one provider-scale run.
type scaleResult struct {
	n                int
	total            time.Duration
	perHandshake     []time.Duration
	teardown         time.Duration
	peakRSSMiB, cpuS float64
	// heapIdleMiB and heapMiB are the manager's live heap (after a collection) before the
	// handshakes and once they are done.
	heapIdleMiB, heapMiB float64
	failed               int
	firstFailure         string
	// cpu is the CPU seconds each of cpuProcesses spent during the handshakes.
	cpu map[string]float64
	// api is what the provider's API server served per handshake.
	api []testenv.APIRate
	// retries counts the manager's "Reconciler error" lines (a reconcile that failed and
	// was retried), firstRetry is the first of them.
	retries    int
	firstRetry string
	// leaseMax is the slowest read of the manager's Lease, as its ServiceAccount, during
	// the handshakes: how long a renewal would have waited.
	leaseMax time.Duration
	// queueWait is, with --priority-and-fairness, the 99th percentile of the time requests
	// waited in the API server's queues during the run, by priority level (from
	// apiserver_flowcontrol_request_wait_duration_seconds).
	queueWait map[string]time.Duration
}

// heapPerConsumerKiB is how much the manager's live heap grew per consumer of the run.
func (s *scaleResult) heapPerConsumerKiB() float64 {
	return (s.heapMiB - s.heapIdleMiB) * 1024 / float64(s.n)
}

// cpuProcesses are the processes whose CPU a scale run reports: the provider's control
// plane, its manager, and this benchmark, which plays the consumers.
var cpuProcesses = []string{"kube-apiserver", "etcd", "kube-controller-manager", "liqo-auth-manager", "consumers (bench)"}

// cpuSnapshot reads the CPU seconds spent so far by the provider's processes, its manager
// m and this process.
func (e *env) cpuSnapshot(m *testenv.Manager) map[string]float64 {
	pids := e.provider.ProcessIDs()
	pids["liqo-auth-manager"] = m.Pid()
	pids["consumers (bench)"] = os.Getpid()
	return cpuOf(pids)
}

// spentSince is what control plane cp's processes spent since a run began: the CPU seconds
// of now (read just now) beyond before, and the API requests per handshake of n beyond
// apiBefore.
func spentSince(ctx context.Context, cp *testenv.ControlPlane, now, before map[string]float64, apiBefore testenv.APICounters, n int) (map[string]float64, []testenv.APIRate, error) {
	for p := range now {
		now[p] -= before[p]
	}
	apiAfter, err := testenv.ReadAPICounters(ctx, cp.Config)
	if err != nil {
		return nil, nil, err
	}
	return now, apiAfter.PerHandshake(apiBefore, n), nil
}

// cpuOf reads the CPU seconds spent so far by each process of pids, by name.
func cpuOf(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		_, out[name] = usage(pid)
	}
	return out
}

// scaleRun authenticates n virtual consumers concurrently into the provider, served by a
// fresh liqo-auth-manager, then removes them all.
func (e *env) scaleRun(ctx context.Context, n int, profile bool) (*scaleResult, error) {
	profile = profile && e.cfg.profileDir != ""
	// The manager serves pprof on loopback in every run: its live heap is read from it.
	pprofAddr, err := testenv.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	// Leader election with twice the default margins: at 3000 consumers at once, the API
	// server answered a renewal after its timeout, and a manager with the defaults stopped
	// (docs/operations.md, "Sizing a provider").
	m, err := e.startManager(e.provider, "--pprof-bind-address="+pprofAddr,
		"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s")
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	res := &scaleResult{n: n, perHandshake: make([]time.Duration, n)}
	if res.heapIdleMiB, err = liveHeapMiB(ctx, pprofAddr); err != nil {
		return nil, err
	}
	consumers, err := testenv.NewVirtualConsumers(fmt.Sprintf("cl-scale-%d-", n), n)
	if err != nil {
		return nil, err
	}
	// Five minutes, and a tenth of a second more per consumer beyond a thousand.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(max(0, n-1000))*100*time.Millisecond)
	defer cancel()
	before := e.cpuSnapshot(m)
	apiBefore, err := testenv.ReadAPICounters(ctx, e.provider.Config)
	if err != nil {
		return nil, err
	}
	var profiles errgroup.Group
	if profile {
		e.profile(ctx, pprofAddr, n, &profiles)
	}
	leader, err := e.watchLeader(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	authenticateAll(ctx, e, consumers, res)
	res.total = time.Since(start)
	leader(res)
	logManagerTrouble(m, res)
	res.peakRSSMiB, res.cpuS = usage(m.Pid())
	// The live heap is read once the manager is idle: the work that follows the last
	// certificates (nonce marks, CSR deletions, Events) is not what it keeps.
	waitIdle(ctx, m.Pid())
	if res.heapMiB, err = liveHeapMiB(ctx, pprofAddr); err != nil {
		return nil, err
	}
	if profile {
		// What the live heap is made of, right after that collection.
		if fetchErr := fetch(ctx, http.DefaultClient, "http://"+pprofAddr+"/debug/pprof/heap", filepath.Join(e.cfg.profileDir, "liqo-auth-manager-heap.pprof")); fetchErr != nil {
			return nil, fetchErr
		}
	}
	if res.cpu, res.api, err = spentSince(ctx, e.provider, e.cpuSnapshot(m), before, apiBefore, n); err != nil {
		return nil, err
	}
	countRetries(m, res)
	if waitErr := profiles.Wait(); waitErr != nil {
		return nil, waitErr
	}
	start = time.Now()
	if removeScaleTenantsErr := e.removeScaleTenants(ctx, consumers, n); removeScaleTenantsErr != nil {
		return nil, removeScaleTenantsErr
	}
	res.teardown = time.Since(start)
	return res, nil
}

// watchLeader starts what a scale run records of the manager's Lease: the slowest read of
// it (probeLease) and, with priority and fairness, the queue waits of its level and of the
// ServiceAccounts'. The function it returns stops it and records both into res (waits it
// could not read are said in the log, and left out).
func (e *env) watchLeader(ctx context.Context) (func(res *scaleResult), error) {
	var before waitBuckets
	if e.cfg.priorityAndFairness {
		var err error
		if before, err = readQueueWaits(ctx, e.provider); err != nil {
			return nil, err
		}
	}
	slowest, err := probeLease(ctx, e.provider)
	if err != nil {
		return nil, err
	}
	return func(res *scaleResult) {
		res.leaseMax = slowest()
		if before == nil {
			return
		}
		var err error
		if res.queueWait, err = queueWaits(ctx, e.provider, before); err != nil {
			log("  the queue waits: " + err.Error())
		}
	}, nil
}

// queueWaitLevels are the priority levels whose queue waits a scale run reports: the
// ServiceAccounts' (the manager's requests), and the manager's Lease requests' own.
var queueWaitLevels = []string{"workload-low", wire.ManagerName}

// waitBuckets are, by priority level, the cumulative counts of
// apiserver_flowcontrol_request_wait_duration_seconds by upper bound (seconds).
type waitBuckets map[string]map[float64]float64

func readQueueWaits(ctx context.Context, cp *testenv.ControlPlane) (waitBuckets, error) {
	out := waitBuckets{}
	for _, level := range queueWaitLevels {
		out[level] = map[float64]float64{}
		for _, le := range []string{"0.005", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10", "15", "30", "+Inf"} {
			n, err := testenv.ReadMetricSum(ctx, cp.Config, "apiserver_flowcontrol_request_wait_duration_seconds_bucket",
				map[string]string{"priority_level": level, "execute": "true", "le": le})
			if err != nil {
				return nil, err
			}
			bound, _ := strconv.ParseFloat(le, 64) // +Inf parses
			out[level][bound] = n
		}
	}
	return out, nil
}

// queueWaits is the 99th percentile, by level, of the queue waits since before (the upper
// bound of the bucket it falls in).
func queueWaits(ctx context.Context, cp *testenv.ControlPlane, before waitBuckets) (map[string]time.Duration, error) {
	after, err := readQueueWaits(ctx, cp)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	for level, buckets := range after {
		bounds := slices.Sorted(maps.Keys(buckets))
		total := buckets[bounds[len(bounds)-1]] - before[level][bounds[len(bounds)-1]]
		if total == 0 {
			continue
		}
		for _, b := range bounds {
			if buckets[b]-before[level][b] >= 0.99*total {
				out[level] = time.Duration(b * float64(time.Second))
				break
			}
		}
	}
	return out, nil
}

// probeLease reads the manager's Lease, as the manager's ServiceAccount, every 250 ms
// until the returned function is called, which returns the slowest read: how long the API
// server kept a leader's renewal waiting while the handshakes flooded it (the manager
// stops when one waits past its renew deadline).
func probeLease(ctx context.Context, cp *testenv.ControlPlane) (func() time.Duration, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.ManagerKubeconfig())
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var slowest time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			t0 := time.Now()
			_ = c.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ManagerName}, &coordinationv1.Lease{})
			if ctx.Err() != nil {
				return
			}
			slowest = max(slowest, time.Since(t0))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() time.Duration {
		cancel()
		<-done
		return slowest
	}, nil
}

// authenticateAll authenticates every consumer at once into the provider, timing each
// handshake into res and counting failures (the first one kept): a failed handshake is a
// result, not an error of the run.
func authenticateAll(ctx context.Context, e *env, consumers []*testenv.VirtualConsumer, res *scaleResult) {
	var mu sync.Mutex
	var eg errgroup.Group
	for i, v := range consumers {
		eg.Go(func() error {
			t0 := time.Now()
			_, authenticateErr := v.Authenticate(ctx, e.consumers, "cl-provider")
			res.perHandshake[i] = time.Since(t0)
			if authenticateErr != nil {
				mu.Lock()
				res.failed++
				if res.firstFailure == "" {
					res.firstFailure = v.ID + ": " + authenticateErr.Error()
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = eg.Wait()
}

// logManagerTrouble prints the manager's last log lines when a handshake failed or the
// manager is gone: its own words explain it.
func logManagerTrouble(m *testenv.Manager, res *scaleResult) {
	if _, statErr := os.Stat(fmt.Sprintf("/proc/%d", m.Pid())); statErr != nil || res.failed > 0 {
		logs := m.Logs()
		log(fmt.Sprintf("  %d failed; the manager's last lines:\n%s", res.failed, logs[max(0, len(logs)-4000):]))
	}
}

// countRetries counts the reconciles the manager retried during the run (its "Reconciler
// error" lines), keeping the first.
func countRetries(m *testenv.Manager, res *scaleResult) {
	for _, l := range strings.Split(m.Logs(), "\n") {
		if strings.Contains(l, "Reconciler error") {
			if res.retries++; res.firstRetry == "" {
				res.firstRetry = l
			}
		}
	}
}

// removeScaleTenants deletes the Tenants of a scale run's consumers at once, and waits
// until the provider's finalizer let each go: one List every 50 ms.
func (e *env) removeScaleTenants(ctx context.Context, consumers []*testenv.VirtualConsumer, n int) error {
	var eg errgroup.Group
	for _, v := range consumers {
		eg.Go(func() error {
			tn := &authv1beta1.Tenant{}
			tn.Namespace, tn.Name = wire.TenantNamespaceName(v.ID), v.ID
			return client.IgnoreNotFound(e.consumers.Delete(ctx, tn))
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	prefix := fmt.Sprintf("cl-scale-%d-", n)
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list authv1beta1.TenantList
		if listErr := e.pc.List(ctx, &list); listErr != nil {
			return false, listErr
		}
		for _, t := range list.Items {
			if strings.HasPrefix(t.Name, prefix) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Tenants to go: %w", err)
	}
	return nil
}

// cliCost times short liqoctl commands, with kubectl as a reference when it
// is installed, and records binary sizes.
type cliCost struct {
	rounds        int
	version, help []time.Duration
	kubectl       []time.Duration
	sizes         map[string]int64
}

// cliWarmup runs before the timed rounds, so the first timed run does not pay
// for reading the binary from disk.
const cliWarmup = 3

func measureCLI(c config) (*cliCost, error) {
	r := &cliCost{rounds: c.cliRounds, sizes: map[string]int64{}}
	for _, b := range []string{"liqoctl", "liqo-auth-manager"} {
		st, err := os.Stat(filepath.Join(c.bin, b))
		if err != nil {
			return nil, fmt.Errorf("%w: run make build first", err)
		}
		r.sizes[b] = st.Size()
	}
	liqoctl := filepath.Join(c.bin, "liqoctl")
	type cliRun struct {
		argv []string
		into *[]time.Duration
	}
	runs := []cliRun{
		{[]string{liqoctl, "version", "--client"}, &r.version},
		{[]string{liqoctl, "--help"}, &r.help},
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		runs = append(runs, cliRun{[]string{kubectl, "version", "--client"}, &r.kubectl})
	}
	for i := 0; i < cliWarmup+c.cliRounds; i++ {
		for _, run := range runs {
			start := time.Now()
			if _, _, err := testenv.RunCommand(context.Background(), run.argv[0], run.argv[1:]...); err != nil {
				return nil, err
			}
			if i >= cliWarmup {
				*run.into = append(*run.into, time.Since(start))
			}
		}
	}
	return r, nil
}

// percentile of a sample, nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(idx, len(s)-1))]
}

// sliceRounds times liqoctl create resourceslice, as a process, from its start to a
// working kubeconfig of the slice's identity (the command returns once the consumer wrote
// it), and delete resourceslice with its proof of revocation, between rounds. In mode
// modeManager a manager runs per cluster; in modeInProcess none does, and both commands,
// given the provider's kubeconfig, run each side's controllers for their own duration.
func (e *env) sliceRounds(ctx context.Context, mode string) (create, remove *latency, err error) {
	if mode == modeManager {
		for _, cp := range []*testenv.ControlPlane{e.consumer, e.provider} {
			m, err := e.startManager(cp)
			if err != nil {
				return nil, nil, err
			}
			defer m.Stop()
		}
	}
	if _, err := e.liqoctl(ctx, e.pairArgs("authenticate")...); err != nil {
		return nil, nil, err
	}
	defer func() { _, _ = e.liqoctl(ctx, e.pairArgs("unauthenticate", "--delete-resourceslices")...) }()
	create = &latency{name: "create resourceslice (to a working kubeconfig), " + mode}
	remove = &latency{name: "delete resourceslice (with its proof), " + mode}
	for i := 0; i < e.cfg.rounds; i++ {
		name := fmt.Sprintf("slice-%d", i)
		args := []string{"resourceslice", name, "--kubeconfig", e.consumer.Kubeconfig, "--remote-cluster-id", "cl-provider"}
		if mode == modeInProcess {
			args = append(args, "--remote-kubeconfig", e.provider.Kubeconfig)
		}
		start := time.Now()
		if _, err := e.liqoctl(ctx, append([]string{"create"}, append(args, "--cpu", "1", "--memory", "1Gi")...)...); err != nil {
			return nil, nil, err
		}
		create.rounds = append(create.rounds, time.Since(start))
		log(fmt.Sprintf("  round %d: %s", i+1, ms(time.Since(start))))
		start = time.Now()
		if _, err := e.liqoctl(ctx, append([]string{"delete"}, args...)...); err != nil {
			return nil, nil, err
		}
		remove.rounds = append(remove.rounds, time.Since(start))
	}
	return create, remove, nil
}

// sliceScaleResult is the outcome of one slice scale run.
type sliceScaleResult struct {
	consumers, perConsumer int
	total, teardown        time.Duration
	perSlice               []time.Duration
	// peakRSSMiB is the manager's peak RSS since it started, cpuS the CPU seconds it spent
	// on the slices.
	peakRSSMiB, cpuS float64
	failed           int
	firstFailure     string
}

// sliceScaleRun has n virtual consumers, authenticated beforehand (untimed), each ask the
// provider, served by a fresh liqo-auth-manager, for per slices at once; then every slice
// is deleted.
func (e *env) sliceScaleRun(ctx context.Context, n, per int) (*sliceScaleResult, error) {
	m, err := e.startManager(e.provider)
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	consumers := make([]*testenv.VirtualConsumer, n)
	var eg errgroup.Group
	for i := range consumers {
		if consumers[i], err = testenv.NewVirtualConsumer(fmt.Sprintf("cl-slices-%03d", i)); err != nil {
			return nil, err
		}
		v := consumers[i]
		eg.Go(func() error { _, err := v.Authenticate(ctx, e.consumers, "cl-provider"); return err })
	}
	if err := eg.Wait(); err != nil {
		return nil, fmt.Errorf("authenticating the consumers: %w", err)
	}
	// The fresh manager first reconciles what the runs before left on the provider (about
	// a millisecond of CPU per tenant record: 4,260 of them after the scale runs), then the
	// consumers' handshakes: the slices are timed from a manager at rest, as a provider's
	// usually is when slices are asked for.
	waitIdle(ctx, m.Pid())
	res := &sliceScaleResult{consumers: n, perConsumer: per, perSlice: make([]time.Duration, n*per)}
	_, cpuBefore := usage(m.Pid())
	var mu sync.Mutex
	start := time.Now()
	for i, v := range consumers {
		for j := 0; j < per; j++ {
			eg.Go(func() error {
				t0 := time.Now()
				_, err := v.RequestSlice(ctx, e.consumers, wire.TenantNamespaceName(v.ID), fmt.Sprintf("slice-%d", j),
					corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
				res.perSlice[i*per+j] = time.Since(t0)
				if err != nil {
					mu.Lock()
					res.failed++
					if res.firstFailure == "" {
						res.firstFailure = v.ID + ": " + err.Error()
					}
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = eg.Wait()
	res.total = time.Since(start)
	res.peakRSSMiB, res.cpuS = usage(m.Pid())
	res.cpuS -= cpuBefore
	start = time.Now()
	for _, v := range consumers {
		eg.Go(func() error {
			tn := wire.TenantNamespaceName(v.ID)
			if err := e.pc.DeleteAllOf(ctx, &authv1beta1.ResourceSlice{}, client.InNamespace(tn)); err != nil {
				return err
			}
			return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				var list authv1beta1.ResourceSliceList
				err := e.pc.List(ctx, &list, client.InNamespace(tn))
				return err == nil && len(list.Items) == 0, err
			})
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	res.teardown = time.Since(start)
	for _, v := range consumers {
		tn := &authv1beta1.Tenant{}
		tn.Namespace, tn.Name = wire.TenantNamespaceName(v.ID), v.ID
		_ = e.pc.Delete(ctx, tn)
	}
	return res, nil
}

// profile takes, in the background, CPU profiles of the provider's API server and of the
// manager serving pprof at pprofAddr, one second into the handshakes of n consumers and
// for about half of their expected duration (at 25 handshakes/s), into the profile
// directory.
func (e *env) profile(ctx context.Context, pprofAddr string, n int, g *errgroup.Group) {
	seconds := max(2, n/50)
	log(fmt.Sprintf("  CPU profiles of %d s into %s", seconds, e.cfg.profileDir))
	apiClient, err := rest.HTTPClientFor(e.provider.Config)
	if err != nil {
		g.Go(func() error { return err })
		return
	}
	if err := os.MkdirAll(e.cfg.profileDir, 0o755); err != nil {
		g.Go(func() error { return err })
		return
	}
	path := func(file string) string { return filepath.Join(e.cfg.profileDir, file) }
	for _, take := range []func() error{
		func() error {
			return cpuProfile(ctx, apiClient, e.provider.Config.Host, seconds, path("kube-apiserver.pprof"))
		},
		func() error {
			return cpuProfile(ctx, http.DefaultClient, "http://"+pprofAddr, seconds, path("liqo-auth-manager.pprof"))
		},
		// The benchmark's own: the virtual consumers' side of the handshakes (the handshake
		// package liqoctl runs) shares the two cores with the provider.
		func() error { return selfCPUProfile(ctx, time.Duration(seconds)*time.Second, path("bench.pprof")) },
	} {
		g.Go(func() error {
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
			return take()
		})
	}
}

// sleepCtx waits for d, or returns ctx's error if it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// selfCPUProfile writes a CPU profile of this process, taken for d, to path.
func selfCPUProfile(ctx context.Context, d time.Duration, path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
	}()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return sleepCtx(ctx, d)
}

// liveHeapMiB forces a garbage collection in the manager serving pprof at addr and returns
// its heap in use right after it (HeapAlloc of runtime.MemStats): what it keeps alive.
func liveHeapMiB(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "# HeapAlloc = "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, err
			}
			return n / (1 << 20), nil
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the manager's heap profile")
}

// waitIdle returns once process pid spent less than 20 ms of CPU in a second, or after 30 s
// (and says so).
func waitIdle(ctx context.Context, pid int) {
	_, last := usage(pid)
	for range 30 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		_, now := usage(pid)
		if now-last < 0.02 {
			return
		}
		last = now
	}
	log(fmt.Sprintf("  process %d still busy after 30 s: measuring anyway", pid))
}
