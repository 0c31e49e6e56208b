// Command bench measures liqo-auth on real local control planes and writes one report:
//
//   - authenticate latency (p50/p95/max over --rounds, unauthenticate in between), with the
//     controllers in-process and with a liqo-auth-manager process per cluster, broken down
//     per handshake step from liqoctl -v;
//   - the manual flow, scripted end to end;
//   - provider scale: N consumers authenticating concurrently into one provider running
//     liqo-auth-manager, with the manager's peak RSS and CPU seconds;
//   - CLI cost: liqoctl version and --help cold start, binary sizes.
//
// Benchmarks measure; nothing here asserts on time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

type config struct {
	bin       string
	out       string
	rounds    int
	cliRounds int
	scale     []int
	// floorScale is how many handshakes' writes the scale floor run makes at once.
	floorScale int
	// sliceConsumers and slicesEach size the slice scale run.
	sliceConsumers, slicesEach int
	// profileDir, when set, receives CPU profiles of the provider's API server, its manager
	// and this benchmark taken during the last scale run, and of the API server during each
	// scale floor run.
	profileDir string
	// priorityAndFairness runs the API servers with API priority and fairness.
	priorityAndFairness bool
	// managerArgs are extra arguments for every liqo-auth-manager the benchmark starts.
	managerArgs []string
	// only names the sections to run (all when empty).
	only map[string]bool
}

// sections of the report, in the order they run.
var sections = []string{"cli", "floor", "auth", "slices", "manual", "scale", "scale-floor", "slice-scale"}

func (c config) runs(section string) bool { return len(c.only) == 0 || c.only[section] }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctrllog.SetLogger(logr.Discard()) // the benchmark's clients log nothing
	c, err := parseFlags()
	if err != nil {
		return err
	}
	binDir, err := testenv.BinDir()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "liqo-auth-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }() // best effort: a temporary directory
	ctx := context.Background()
	r := &report{started: time.Now()}

	if c.runs("cli") {
		log("CLI cost")
		if r.cli, err = measureCLI(c); err != nil {
			return err
		}
	}
	env, err := newEnv(ctx, c, binDir, root)
	if err != nil {
		return err
	}
	defer env.stop()
	// A section that fails (a manager that lost its Lease in a flood) stops the run, and
	// the report still says what was measured before it, and where it stopped.
	measureErr := env.measureLatencies(ctx, c, r)
	if measureErr == nil {
		measureErr = env.measureScale(ctx, c, r)
	}
	if measureErr != nil {
		r.stopped = measureErr.Error()
	}
	r.finished = time.Now()
	md := r.markdown()
	fmt.Print(md)
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(md), 0o644); err != nil {
			return errors.Join(measureErr, err)
		}
	}
	if measureErr != nil {
		return fmt.Errorf("%w (the report holds what was measured before)", measureErr)
	}
	return nil
}

// parseFlags reads the command line into a config: --only's sections checked, --scale's
// numbers parsed, --bin made absolute.
func parseFlags() (config, error) {
	var c config
	var scale string
	flag.StringVar(&c.bin, "bin", "bin", "directory of liqoctl and liqo-auth-manager")
	flag.StringVar(&c.out, "out", "", "also write the report to this Markdown file")
	flag.IntVar(&c.rounds, "rounds", 20, "rounds of each latency measurement")
	flag.IntVar(&c.cliRounds, "cli-rounds", 100, "rounds of each CLI cold-start measurement")
	flag.StringVar(&scale, "scale", "10,50,200,1000,3000", "numbers of concurrent consumers for the scale runs")
	flag.IntVar(&c.floorScale, "floor-scale", 1000, "handshakes of the scale floor runs: their writes alone, at once, with no manager, made by the administrator, then by their principals")
	flag.IntVar(&c.sliceConsumers, "slice-consumers", 20, "consumers of the slice scale run")
	flag.IntVar(&c.slicesEach, "slices-each", 5, "slices each consumer asks for at once in the slice scale run")
	flag.BoolVar(&c.priorityAndFairness, "priority-and-fairness", false, "run the API servers with API priority and fairness, as Kubernetes does by default (the history was measured without it)")
	flag.StringVar(&c.profileDir, "profile-dir", "", "write CPU profiles of the provider's API server, its manager and this benchmark (its virtual consumers), taken during the handshakes of the last scale run, and of the API server during the scale floor, to this directory")
	managerArgs := flag.String("manager-args", "", "extra arguments, space-separated, for every liqo-auth-manager started (e.g. --kube-api-qps=500)")
	only := flag.String("only", "", "comma-separated sections to run, of "+strings.Join(sections, ",")+" (default: all)")
	flag.Parse()
	c.managerArgs = strings.Fields(*managerArgs)
	if *only != "" {
		c.only = map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			if !slices.Contains(sections, s) {
				return c, fmt.Errorf("--only: unknown section %q (want some of %s)", s, strings.Join(sections, ","))
			}
			c.only[s] = true
		}
	}
	for name, v := range map[string]int{"--rounds": c.rounds, "--cli-rounds": c.cliRounds, "--floor-scale": c.floorScale, "--slice-consumers": c.sliceConsumers, "--slices-each": c.slicesEach} {
		if v < 1 {
			return c, fmt.Errorf("%s: %d is not a positive number", name, v)
		}
	}
	for _, s := range strings.Split(scale, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, fmt.Errorf("--scale: %q is not a positive number", s)
		}
		c.scale = append(c.scale, n)
	}
	abs, err := filepath.Abs(c.bin)
	if err != nil {
		return c, err
	}
	c.bin = abs
	return c, nil
}

// measureLatencies runs the latency sections c asks for, in report order (floor, auth,
// slices, manual), into r.
func (e *env) measureLatencies(ctx context.Context, c config, r *report) error {
	var err error
	if c.runs("floor") {
		log("floor: API calls and the signer alone")
		if r.floor, err = e.floorRounds(ctx); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		if r.idle, err = e.idleManager(); err != nil {
			return fmt.Errorf("idle manager: %w", err)
		}
	}
	for _, mode := range []string{modeInProcess, modeManager, modePeeringUser} {
		if !c.runs("auth") {
			break
		}
		log("authenticate latency, " + mode)
		res, authenticateRoundsErr := e.authenticateRounds(ctx, mode)
		if authenticateRoundsErr != nil {
			return fmt.Errorf("authenticate (%s): %w", mode, authenticateRoundsErr)
		}
		r.auth = append(r.auth, res)
	}
	for _, mode := range []string{modeInProcess, modeManager} {
		if !c.runs("slices") {
			break
		}
		log("resource slice latency, " + mode)
		create, remove, sliceRoundsErr := e.sliceRounds(ctx, mode)
		if sliceRoundsErr != nil {
			return fmt.Errorf("resource slices (%s): %w", mode, sliceRoundsErr)
		}
		r.slices = append(r.slices, create, remove)
	}
	if c.runs("manual") {
		log("manual flow latency")
		if r.manual, err = e.manualRounds(ctx); err != nil {
			return fmt.Errorf("manual flow: %w", err)
		}
	}
	return nil
}

// measureScale runs the scale sections c asks for (provider scale for each --scale, then
// slice scale) into r; the last provider scale run is the profiled one.
func (e *env) measureScale(ctx context.Context, c config, r *report) error {
	for _, n := range c.scale {
		if !c.runs("scale") {
			break
		}
		log(fmt.Sprintf("provider scale, %d consumers", n))
		res, err := e.scaleRun(ctx, n, n == c.scale[len(c.scale)-1])
		if err != nil {
			return fmt.Errorf("scale %d: %w", n, err)
		}
		r.scale = append(r.scale, res)
	}
	if c.runs("scale-floor") {
		for _, asPrincipals := range []bool{false, true} {
			log(fmt.Sprintf("scale floor, %d handshakes' writes without a handshake (as their principals: %t)", c.floorScale, asPrincipals))
			res, err := e.scaleFloorRun(ctx, c.floorScale, asPrincipals)
			if err != nil {
				return fmt.Errorf("scale floor: %w", err)
			}
			r.scaleFloor = append(r.scaleFloor, res)
		}
	}
	if c.runs("slice-scale") {
		log(fmt.Sprintf("slice scale, %d consumers x %d slices", c.sliceConsumers, c.slicesEach))
		var err error
		if r.sliceScale, err = e.sliceScaleRun(ctx, c.sliceConsumers, c.slicesEach); err != nil {
			return fmt.Errorf("slice scale: %w", err)
		}
	}
	return nil
}

func log(s string) { fmt.Fprintf(os.Stderr, "bench: %s\n", s) }
