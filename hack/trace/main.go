// Command trace prints the timeline of one liqoctl authenticate, request by request, as
// both API servers saw it: two local control planes write an audit event per request, the
// handshake runs a few times to warm up (unauthenticate in between), and the requests of
// the last one are printed in order, with when each arrived (ms after liqoctl started),
// how long the API server took, who asked, and what. It answers what a benchmark's p50
// cannot: which requests wait on which, and where the time between them goes.
//
// With --consumers N it answers the scale run's question instead: N virtual consumers
// (key pairs acting through the provider administrator, as the benchmark's scale run does)
// authenticate at once into the provider and its manager, and the provider's requests are
// counted per handshake by who asked, verb and resource.
//
// Usage: go run ./hack/trace [--bin bin] [--mode managers|in-process|peering-user] [--warmup 3] [--consumers N]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// Modes of the handshake traced.
const (
	modeManagers    = "managers"
	modeInProcess   = "in-process"
	modePeeringUser = "peering-user"
)

// auditEvent is what the timeline reads of one audit event (level Metadata).
type auditEvent struct {
	Stage     string                                                  `json:"stage"`
	Verb      string                                                  `json:"verb"`
	URI       string                                                  `json:"requestURI"`
	User      struct{ Username string }                               `json:"user"`
	Object    struct{ Resource, Namespace, Name, Subresource string } `json:"objectRef"`
	Received  time.Time                                               `json:"requestReceivedTimestamp"`
	Completed time.Time                                               `json:"stageTimestamp"`
	Response  struct{ Code int }                                      `json:"responseStatus"`
}

type options struct {
	bin, mode string
	warmup    int
	all       bool
	settle    time.Duration
	consumers int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory of liqoctl and liqo-auth-manager")
	flag.StringVar(&o.mode, "mode", modeManagers, "who runs the controllers: managers (each as its ServiceAccount), in-process, or peering-user (managers, the provider reached with a peering user)")
	flag.IntVar(&o.warmup, "warmup", 3, "handshakes before the traced one")
	flag.BoolVar(&o.all, "all", false, "also print leases, watches and OpenAPI requests")
	flag.DurationVar(&o.settle, "settle", time.Second, "pause between the previous round's unauthenticate and the traced authenticate (0: back to back, as the benchmark runs them)")
	flag.IntVar(&o.consumers, "consumers", 0, "instead of one liqoctl authenticate, this many virtual consumers at once into the provider's manager; prints the provider's requests per handshake by user, verb and resource")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if !slices.Contains([]string{modeManagers, modeInProcess, modePeeringUser}, o.mode) {
		return fmt.Errorf("--mode %q: one of %s, %s, %s", o.mode, modeManagers, modeInProcess, modePeeringUser)
	}
	if o.consumers > 0 && o.mode != modeManagers {
		return fmt.Errorf("--consumers runs against the provider's manager: it needs --mode %s", modeManagers)
	}
	if o.consumers > 0 && o.mode != modeManagers {
		return fmt.Errorf("--consumers runs against the provider's manager: it needs --mode %s", modeManagers)
	}
	s := &session{o: o, liqoctl: filepath.Join(o.bin, "liqoctl")}
	defer s.stop()
	if err := s.setup(ctx); err != nil {
		return err
	}
	if o.consumers > 0 {
		return s.scale(ctx, o.consumers, out)
	}
	if o.consumers > 0 {
		return s.scale(ctx, o.consumers, out)
	}
	for round := 0; round <= o.warmup; round++ {
		if err := s.round(round == o.warmup, out); err != nil {
			return err
		}
	}
	return nil
}

// session is two control planes with liqo-auth installed (and their managers).
type session struct {
	o        options
	liqoctl  string
	root     string
	c, p     *testenv.ControlPlane
	managers []*testenv.Manager
	pm       *testenv.Manager
	// metrics is the address of the provider's manager's metrics.
	metrics string
}

func (s *session) setup(ctx context.Context) error {
	var err error
	if s.root, err = os.MkdirTemp("", "liqo-auth-trace-"); err != nil {
		return err
	}
	for _, name := range []string{"consumer", "provider"} {
		cp, startErr := testenv.Start(ctx, testenv.Options{Name: name, Dir: filepath.Join(s.root, name), BinDir: os.Getenv("LIQO_AUTH_CONTROLPLANE_DIR"), AuditLog: true})
		if startErr != nil {
			return startErr
		}
		if s.c == nil {
			s.c = cp
		} else {
			s.p = cp
		}
	}
	for cp, id := range map[*testenv.ControlPlane]string{s.c: "cl-consumer", s.p: "cl-provider"} {
		if _, installErr := command(s.liqoctl, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", id); installErr != nil {
			return installErr
		}
	}
	if s.o.mode == modeInProcess {
		return nil
	}
	if s.metrics, err = testenv.FreeLoopbackAddr(); err != nil {
		return err
	}
	for _, cp := range []*testenv.ControlPlane{s.c, s.p} {
		var extra []string
		if cp == s.p {
			extra = append(extra, "--metrics-bind-address="+s.metrics, "--pprof-bind-address=127.0.0.1:16060")
		}
		m, err := startManager(ctx, s.o.bin, cp, extra...)
		if err != nil {
			return err
		}
		s.managers = append(s.managers, m)
		if cp == s.p {
			s.pm = m
		}
	}
	return nil
}

func (s *session) stop() {
	for _, m := range s.managers {
		m.Stop()
	}
	for _, cp := range []*testenv.ControlPlane{s.c, s.p} {
		if cp != nil {
			cp.Stop()
		}
	}
	if s.root != "" {
		_ = os.RemoveAll(s.root)
	}
}

// round authenticates and unauthenticates once; traced prints the timeline.
func (s *session) round(traced bool, out io.Writer) error {
	remote := s.p.Kubeconfig
	if s.o.mode == modePeeringUser {
		kc, err := command(s.liqoctl, "generate", "peering-user", "--kubeconfig", s.p.Kubeconfig, "--consumer-cluster-id", "cl-consumer")
		if err != nil {
			return err
		}
		remote = filepath.Join(s.root, "peering-user.kubeconfig")
		if err := os.WriteFile(remote, []byte(kc), 0o600); err != nil {
			return err
		}
	}
	time.Sleep(s.o.settle) // what the last round set off is done
	start := time.Now()
	_, steps, err := testenv.RunCommand(context.Background(), s.liqoctl, "authenticate", "-v", "--kubeconfig", s.c.Kubeconfig, "--remote-kubeconfig", remote)
	if err != nil {
		return err
	}
	end := time.Now()
	if traced {
		time.Sleep(500 * time.Millisecond) // the audit log is written after the response
		fmt.Fprintf(out, "liqoctl authenticate (%s): %v, its steps:\n%s\n", s.o.mode, end.Sub(start).Round(time.Millisecond), steps)
		fmt.Fprintln(out, "   at ms  took ms  user  verb  resource  namespace/name  code")
		for _, cp := range []*testenv.ControlPlane{s.c, s.p} {
			if err := timeline(out, cp, start, end, s.o.all); err != nil {
				return err
			}
		}
	}
	if _, err := command(s.liqoctl, "unauthenticate", "--kubeconfig", s.c.Kubeconfig, "--remote-kubeconfig", s.p.Kubeconfig); err != nil {
		return err
	}
	if s.o.mode == modePeeringUser {
		// The peering user retired itself; a leftover one is removed.
		_, _ = command(s.liqoctl, "delete", "peering-user", "--kubeconfig", s.p.Kubeconfig, "--consumer-cluster-id", "cl-consumer")
	}
	return nil
}

// startManager runs liqo-auth-manager for cp as its ServiceAccount, as it is deployed.
func startManager(ctx context.Context, bin string, cp *testenv.ControlPlane, extra ...string) (*testenv.Manager, error) {
	if err := cp.WriteManagerKubeconfig(ctx); err != nil {
		return nil, err
	}
	return testenv.StartManager(filepath.Join(bin, "liqo-auth-manager"), append(append([]string{"--kubeconfig", cp.ManagerKubeconfig(), "--health-probe-bind-address=0"}, extra...), extra...), time.Minute)
}

// command runs name with args and returns its stdout.
func command(name string, args ...string) (string, error) {
	out, _, err := testenv.RunCommand(context.Background(), name, args...)
	return out, err
}

// timeline prints the requests cp's API server received between start and just after
// end, in the order they arrived; leases, watches and OpenAPI only with all.
func timeline(out io.Writer, cp *testenv.ControlPlane, start, end time.Time, all bool) error {
	evs, err := auditEvents(cp, start, end.Add(300*time.Millisecond), all)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s (%d requests)\n", cp.Name, len(evs))
	for _, e := range evs {
		user := strings.TrimPrefix(e.User.Username, "system:serviceaccount:")
		fmt.Fprintf(out, "%8.1f %8.1f  %-34.34s %-7s %-34s %s/%s %d\n", ms(e.Received.Sub(start)), ms(e.Completed.Sub(e.Received)), user, e.Verb, e.resource(), e.Object.Namespace, e.Object.Name, e.Response.Code)
	}
	return nil
}

// auditEvents are the requests cp's API server received between from and to, in the
// order they arrived; leases, watches and OpenAPI only with all.
func auditEvents(cp *testenv.ControlPlane, from, to time.Time, all bool) ([]auditEvent, error) {
	f, err := os.Open(cp.AuditLogPath())
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var evs []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.shown(from, to, all) {
			evs = append(evs, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, errors.New("no request in the audit log of " + cp.Name + " during the handshake")
	}
	slices.SortFunc(evs, func(a, b auditEvent) int { return a.Received.Compare(b.Received) })
	return evs, nil
}

// resource is what e asked for: resource/subresource, or its URI.
func (e *auditEvent) resource() string {
	res := e.Object.Resource
	if e.Object.Subresource != "" {
		res += "/" + e.Object.Subresource
	}
	if res == "" {
		res = e.URI
	}
	return res
}

// shown says whether e, received between from and to, is shown: leases, watches and
// OpenAPI only with all.
func (e *auditEvent) shown(from, to time.Time, all bool) bool {
	if e.Stage != "ResponseComplete" || e.Received.Before(from) || e.Received.After(to) {
		return false
	}
	return all || (e.Object.Resource != "leases" && e.Verb != "watch" && !strings.HasPrefix(e.URI, "/openapi"))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
