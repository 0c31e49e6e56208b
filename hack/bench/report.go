package main

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
)

type report struct {
	started, finished time.Time
	cli               *cliCost
	auth              []*latency
	manual            *latency
	slices            []*latency
	sliceScale        *sliceScaleResult
	scale             []*scaleResult
	scaleFloor        []*scaleFloorResult
	floor             []floor
	idle              *idleRSS
	// stopped is why the run stopped before its last section ("" when it ran them all).
	stopped string
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `make bench` (hack/bench) on %s, in %s.\n\n", r.started.UTC().Format(time.RFC3339), r.finished.Sub(r.started).Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s RAM, Linux %s, %s. Clusters: local etcd + kube-apiserver + kube-controller-manager v1.37.1 on loopback (internal/testenv), the same machine as liqoctl.\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")), runtime.Version())
	if r.stopped != "" {
		fmt.Fprintf(&b, "**This run stopped early**: %s. The sections below hold what it measured before; the rest did not run.\n\n", r.stopped)
	}
	r.goalsMarkdown(&b)

	r.latencyMarkdown(&b)

	if len(r.floor) > 0 {
		r.floorMarkdown(&b)
	}
	r.scaleMarkdown(&b)
	if len(r.scale) > 0 {
		r.cpuSplitMarkdown(&b)
	}

	r.scaleFloorMarkdown(&b)
	r.sliceScaleMarkdown(&b)

	if r.cli != nil {
		r.cliMarkdown(&b)
	}
	if history := readFile(historyFile); history != "" {
		b.WriteString("\n" + history)
	}
	return b.String()
}

// latencyMarkdown is the latency section: every latency measurement, unauthenticate
// after each authenticate mode, then the steps of each mode with the slowest in bold.
func (r *report) latencyMarkdown(b *strings.Builder) {
	all := append([]*latency{}, r.auth...)
	if r.manual != nil {
		all = append(all, r.manual)
	}
	all = append(all, r.slices...)
	if len(all) > 0 {
		b.WriteString("## Latency\n\nWall time of the liqoctl process, unauthenticate between rounds.\n\n| measurement | rounds | p50 | p95 | max |\n|---|---|---|---|---|\n")
	}
	for _, l := range all {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", l.name, len(l.rounds), ms(percentile(l.rounds, .5)), ms(percentile(l.rounds, .95)), ms(percentile(l.rounds, 1)))
	}
	for _, l := range r.auth {
		fmt.Fprintf(b, "| unauthenticate (after %s) | %d | %s | %s | %s |\n", strings.TrimPrefix(l.name, "authenticate, "), len(l.unauth), ms(percentile(l.unauth, .5)), ms(percentile(l.unauth, .95)), ms(percentile(l.unauth, 1)))
	}
	for _, l := range r.auth {
		fmt.Fprintf(b, "\n### Steps of %s\n\nTime from the previous step line to this one (liqoctl -v), p50 and p95 over the rounds; the slowest step is in bold.\n\n| step | p50 | p95 |\n|---|---|---|\n", l.name)
		slowest := ""
		for _, s := range l.stepOrder {
			if slowest == "" || percentile(l.steps[s], .5) > percentile(l.steps[slowest], .5) {
				slowest = s
			}
		}
		for _, s := range l.stepOrder {
			name := s
			if s == slowest {
				name = "**" + s + "**"
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", name, ms(percentile(l.steps[s], .5)), ms(percentile(l.steps[s], .95)))
		}
	}
}

// scaleMarkdown is the provider scale table, with each run's first failure and first
// retried reconcile.
func (r *report) scaleMarkdown(b *strings.Builder) {
	if len(r.scale) > 0 {
		b.WriteString("\n## Provider scale\n\nN consumers (key pairs without their own control plane; the provider and its liqo-auth-manager are real) authenticate concurrently into one provider; then all are removed.\n\n")
		b.WriteString("The manager's live heap is its heap in use right after a forced collection (pprof), before the handshakes and once they are done; per consumer is the difference divided by N. Its peak RSS is what the kernel saw at most, garbage included (the manager lets its heap grow to one and a half times what is live before it collects, GOGC=50, unless GOGC or GOMEMLIMIT say otherwise). The slowest Lease read is the manager's ServiceAccount reading its Lease every 250 ms during the handshakes: how long a leader's renewal would have waited (the manager stops when one waits past its renew deadline, 10 s by default).\n\n")
		b.WriteString("| consumers | total | handshakes/s | p50 per handshake | p95 per handshake | failed | reconciles retried | manager peak RSS | manager live heap | live heap per consumer | manager CPU | slowest Lease read | teardown |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	}
	for _, s := range r.scale {
		fmt.Fprintf(b, "| %d | %s | %.1f | %s | %s | %d | %d | %.0f MiB | %.1f MiB | %.1f KiB | %.1f s | %s | %s |\n", s.n, ms(s.total), float64(s.n)/s.total.Seconds(),
			ms(percentile(s.perHandshake, .5)), ms(percentile(s.perHandshake, .95)), s.failed, s.retries, s.peakRSSMiB, s.heapMiB,
			s.heapPerConsumerKiB(), s.cpuS, ms(s.leaseMax), ms(s.teardown))
		if len(s.queueWait) > 0 {
			var waits []string
			for _, level := range slices.Sorted(maps.Keys(s.queueWait)) {
				waits = append(waits, fmt.Sprintf("%s %s", level, ms(s.queueWait[level])))
			}
			fmt.Fprintf(b, "\nAt %d, the 99th percentile of the API server's queue waits (priority and fairness, by level; the upper bound of its bucket): %s\n\n", s.n, strings.Join(waits, ", "))
		}
		if s.firstFailure != "" {
			fmt.Fprintf(b, "\nFirst failure at %d: %s\n\n", s.n, s.firstFailure)
		}
		if s.firstRetry != "" {
			fmt.Fprintf(b, "\nFirst retried reconcile at %d: `%.300s`\n\n", s.n, s.firstRetry)
		}
	}
}

// scaleFloorMarkdown is the scale floor section, when it ran: the writes as the
// administrator, then as their principals.
func (r *report) scaleFloorMarkdown(b *strings.Builder) {
	if len(r.scaleFloor) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Scale floor\n\nThe writes of %d handshakes and nothing else, at once, on a provider with no manager running (the consumer's control plane, the same build installed alike, which the scale runs leave untouched): for each consumer, the tenant namespace, its record and the manager's binding there, the nonce, the Tenant, the nonce's consumption, the finalizer, the Role and two RoleBindings, five SubjectAccessReviews, the CSR, its approval and the signer's certificate (one watch of CSRs for all), the certificate recorded, the Tenant's status, the Event, the CSR deleted. No read, no check, no cache (a write the API server refuses as Forbidden, as it does while its authorizer has not yet seen the manager's binding made a moment before, is made again after the tenant controller's backoff, and counted): the floor under any controller that makes these writes, on this machine. Made first all by the administrator (whom RBAC and the admission policies wave through), then each by the principal that makes it in a handshake: the consumer's part by the administrator, the acceptance's and the issuance's by the manager's ServiceAccount, authorized by RBAC and checked by the admission policies of `liqoctl install` as the manager's own requests are, as many handshakes at once as the manager's tenant controller has workers (%d): the floor under a controller with the manager's narrow identity and pace.\n\n", r.scaleFloor[0].n, tenant.Workers)
	b.WriteString("| writes by | handshakes | total | handshakes/s | writes retried | " + strings.Join(floorProcesses, " | ") + " | total CPU | CPU-bound floor |\n|---|---|---|---|---|" + strings.Repeat("---|", len(floorProcesses)+2) + "\n")
	for _, s := range r.scaleFloor {
		fmt.Fprintf(b, "| %s | %d | %s | %.1f | %d |", s.madeBy(), s.n, ms(s.total), float64(s.n)/s.total.Seconds(), s.retried)
		cpuCells(b, floorProcesses, s.cpu)
	}
	for _, s := range r.scaleFloor {
		fmt.Fprintf(b, "\nWhat the provider's API server served per handshake, the writes made by %s:\n\n", s.madeBy())
		apiTable(b, s.api)
	}
}

// sliceScaleMarkdown is the slice scale section, when it ran.
func (r *report) sliceScaleMarkdown(b *strings.Builder) {
	if s := r.sliceScale; s != nil {
		fmt.Fprintf(b, "\n## Slice scale\n\n%d consumers (virtual, authenticated beforehand) each ask the provider for %d ResourceSlices at once, once its liqo-auth-manager (started for this run) is at rest; it decides each and has each slice identity's certificate issued; then every slice is deleted. The manager's CPU is what it spent on the slices.\n\n", s.consumers, s.perConsumer)
		b.WriteString("| slices | total | slices/s | p50 per slice | p95 per slice | failed | manager peak RSS | manager CPU | teardown |\n|---|---|---|---|---|---|---|---|---|\n")
		n := s.consumers * s.perConsumer
		fmt.Fprintf(b, "| %d | %s | %.1f | %s | %s | %d | %.0f MiB | %.1f s | %s |\n", n, ms(s.total), float64(n)/s.total.Seconds(),
			ms(percentile(s.perSlice, .5)), ms(percentile(s.perSlice, .95)), s.failed, s.peakRSSMiB, s.cpuS, ms(s.teardown))
		if s.firstFailure != "" {
			fmt.Fprintf(b, "\nFirst failure: %s\n", s.firstFailure)
		}
	}
}

func (r *report) cliMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## CLI cost\n\nWall time of a cold process start, %d rounds after %d untimed ones, measured before any control plane starts.\n\n", r.cli.rounds, cliWarmup)
	b.WriteString("| measurement | p50 | p95 |\n|---|---|---|\n")
	cli := []struct {
		name string
		d    []time.Duration
	}{{"`liqoctl version --client`", r.cli.version}, {"`liqoctl --help`", r.cli.help}, {"`kubectl version --client` (reference)", r.cli.kubectl}}
	for _, m := range cli {
		if len(m.d) > 0 {
			fmt.Fprintf(b, "| %s | %s | %s |\n", m.name, ms(percentile(m.d, .5)), ms(percentile(m.d, .95)))
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "Binary sizes: liqoctl %.1f MiB, liqo-auth-manager %.1f MiB (static, stripped, -trimpath).\n", float64(r.cli.sizes["liqoctl"])/(1<<20), float64(r.cli.sizes["liqo-auth-manager"])/(1<<20))
}

// historyFile holds the before/after measurements of past changes, kept by hand and
// appended to every report, so that a run does not erase why the numbers are what they are.
const historyFile = "hack/bench/history.md"

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func cpuModel() string {
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	for _, l := range strings.Split(readFile("/proc/meminfo"), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(l, "MemTotal: %f kB", &kb); err == nil {
			return fmt.Sprintf("%.0f GiB", kb/(1<<20))
		}
	}
	return "unknown"
}

// cpuSplitMarkdown shows, per scale run, the CPU seconds each process spent while the
// consumers authenticated: which of them limits the throughput on this machine.
func (r *report) cpuSplitMarkdown(b *strings.Builder) {
	b.WriteString("\nCPU seconds spent during the handshakes of each run, per process (the machine has ")
	fmt.Fprintf(b, "%d CPUs, so a run of T seconds has at most %d·T CPU seconds):\n\n", runtime.NumCPU(), runtime.NumCPU())
	b.WriteString("| consumers | " + strings.Join(cpuProcesses, " | ") + " | total | CPU-bound floor |\n|---|" + strings.Repeat("---|", len(cpuProcesses)+2) + "\n")
	for _, s := range r.scale {
		fmt.Fprintf(b, "| %d |", s.n)
		cpuCells(b, cpuProcesses, s.cpu)
	}
	last := r.scale[len(r.scale)-1]
	fmt.Fprintf(b, "\nWhat the provider's API server served per handshake in the run of %d (its apiserver_request_total and apiserver_watch_events_total, from the manager, the signer and the consumers together):\n\n", last.n)
	apiTable(b, last.api)
}

// cpuCells ends a table row with the CPU seconds of each of processes in cpu, their total,
// and the CPU-bound floor that total sets on this machine.
func cpuCells(b *strings.Builder, processes []string, cpu map[string]float64) {
	total := 0.0
	for _, p := range processes {
		fmt.Fprintf(b, " %.1f s |", cpu[p])
		total += cpu[p]
	}
	fmt.Fprintf(b, " %.1f s | %s |\n", total, ms(time.Duration(total/float64(runtime.NumCPU())*float64(time.Second))))
}

// apiTable is the table of what an API server served per handshake.
func apiTable(b *strings.Builder, api []testenv.APIRate) {
	b.WriteString("| request or watch event | per handshake |\n|---|---|\n")
	for _, a := range api {
		fmt.Fprintf(b, "| %s | %.1f |\n", a.What, a.Per)
	}
}

// floorMarkdown shows what the building blocks of a handshake cost alone.
func (r *report) floorMarkdown(b *strings.Builder) {
	b.WriteString("\n## Floor\n\nThe building blocks of a handshake alone, on the provider with no manager running: one API call of each kind over a warm connection from one client, and the CSR signer (kube-controller-manager) issuing one certificate. ")
	b.WriteString("A handshake cannot be faster than a process start plus the calls that depend on each other: the steps table above shows them one by one.\n\n| measurement | rounds | p50 | p95 |\n|---|---|---|---|\n")
	if r.cli != nil {
		fmt.Fprintf(b, "| process start (`liqoctl version --client`) | %d | %s | %s |\n", len(r.cli.version), ms(percentile(r.cli.version, .5)), ms(percentile(r.cli.version, .95)))
	}
	for _, f := range r.floor {
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", f.name, len(f.times), msf(percentile(f.times, .5)), msf(percentile(f.times, .95)))
	}
	if i := r.idle; i != nil {
		fmt.Fprintf(b, "\nliqo-auth-manager idle, 5 s after it started on a provider without tenants: %.1f MiB resident, of which %.1f MiB anonymous (heap, stacks) and %.1f MiB file-backed (the pages of its binary it touched).\n", i.total, i.anon, i.file)
	}
}

// msf is ms with one decimal, for durations of a few milliseconds.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
