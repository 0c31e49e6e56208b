package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/liqo-auth/liqo-auth/internal/sizing"
)

// goal is one of the performance goals (issue 34) judged on what a run measured.
type goal struct {
	what, target, measured string
	met                    bool
}

// Goals of issue 34. The absolute ones were set on a 2-core machine; the scale goal is
// also judged against the floor of its writes measured in the same run, which holds on
// any machine.
const (
	goalInProcess   = 150 * time.Millisecond
	goalManager     = 100 * time.Millisecond
	goalCLI         = 20 * time.Millisecond
	goalScaleN      = 1000
	goalScaleTotal  = 25 * time.Second
	goalScaleRSSMiB = 100
	// goalFloorMargin: the floor runs at another moment, on the other control plane, and
	// the handshakes matched it within a few percent on the Xeon (seventeenth session).
	goalFloorMargin   = 1.1
	goalSlicesPer100  = 4 * time.Second
	goalFleet         = 10000
	goalLargestScaleN = 3000
)

// goals judges each goal whose measurement ran.
func (r *report) goals() []goal {
	var g []goal
	for _, l := range r.auth {
		if len(l.rounds) == 0 {
			continue
		}
		target := goalManager
		if l.name == "authenticate, "+modeInProcess {
			target = goalInProcess
		}
		p50 := percentile(l.rounds, .5)
		g = append(g, goal{l.name + ", p50", "≤ " + ms(target), ms(p50), p50 <= target})
	}
	if c := r.cli; c != nil {
		kubectl := percentile(c.kubectl, .5)
		for _, m := range []struct {
			name string
			d    []time.Duration
		}{{"`liqoctl version --client`", c.version}, {"`liqoctl --help`", c.help}} {
			if len(m.d) == 0 {
				continue
			}
			p50 := percentile(m.d, .5)
			measured := ms(p50)
			if kubectl > 0 {
				// The issue gives 20 ms as "a quarter of kubectl's" on its machine; on a faster
				// one a quarter is below what the libraries' initialization alone costs
				// (docs/benchmarks.md), so the share is shown, not judged.
				measured += fmt.Sprintf(" (%.0f %% of `kubectl version --client`'s %s)", 100*float64(p50)/float64(kubectl), ms(kubectl))
			}
			g = append(g, goal{m.name + ", p50", "≤ " + ms(goalCLI), measured, p50 <= goalCLI})
		}
	}
	g = append(g, r.scaleGoals()...)
	if s := r.sliceScale; s != nil {
		n := s.consumers * s.perConsumer
		target := goalSlicesPer100 * time.Duration(n) / 100
		g = append(g, goal{fmt.Sprintf("%d slices, total", n), fmt.Sprintf("≤ %s, 0 failed", secs(target)), fmt.Sprintf("%s, %d failed", secs(s.total), s.failed), s.total <= target && s.failed == 0})
	}
	return g
}

// scaleGoals judges the provider scale runs: the run of 1000 against the time and
// memory and against the floor of its writes by their principals in this run, the largest
// run for the fleet one manager holds within the release manifest's memory limit.
func (r *report) scaleGoals() []goal {
	var g []goal
	var largest *scaleResult
	for _, s := range r.scale {
		if largest == nil || s.n > largest.n {
			largest = s
		}
		if s.n != goalScaleN {
			continue
		}
		g = append(g,
			goal{fmt.Sprintf("%d consumers, total", s.n), fmt.Sprintf("≤ %s, 0 failed", secs(goalScaleTotal)), fmt.Sprintf("%s, %d failed", secs(s.total), s.failed), s.total <= goalScaleTotal && s.failed == 0},
			goal{fmt.Sprintf("%d consumers, manager peak RSS", s.n), fmt.Sprintf("≤ %d MiB", goalScaleRSSMiB), fmt.Sprintf("%.0f MiB", s.peakRSSMiB), s.peakRSSMiB <= goalScaleRSSMiB})
		for _, f := range r.scaleFloor {
			if f.asPrincipals && f.n == s.n {
				g = append(g, goal{fmt.Sprintf("%d consumers, total, against their writes alone by their principals", s.n),
					fmt.Sprintf("within %.0f %% of the floor of this run (%s)", 100*(goalFloorMargin-1), secs(f.total)),
					fmt.Sprintf("%s (%.2f × the floor)", secs(s.total), s.total.Seconds()/f.total.Seconds()),
					s.total.Seconds() <= goalFloorMargin*f.total.Seconds() && s.failed == 0})
			}
		}
	}
	if largest == nil {
		return g
	}
	g = append(g, goal{"largest fleet measured", fmt.Sprintf("≥ %d consumers, 0 failed", goalLargestScaleN), fmt.Sprintf("%d, %d failed", largest.n, largest.failed), largest.n >= goalLargestScaleN && largest.failed == 0})
	fleetGoal := goal{what: fmt.Sprintf("consumers one manager holds within the release manifest's %s (from the live heap at %d)", sizing.ManagerMemoryLimit, largest.n), target: fmt.Sprintf("≥ %d", goalFleet)}
	if largest.failed > 0 {
		// The live heap holds fewer consumers than the run had: per consumer it would
		// come out too low, and the fleet too large.
		fleetGoal.measured = fmt.Sprintf("not judged: %d handshakes failed", largest.failed)
	} else {
		perConsumerKiB := largest.heapPerConsumerKiB()
		fleet := sizing.ManagerFleet(largest.heapIdleMiB*(1<<20), perConsumerKiB*(1<<10))
		fleetGoal.measured, fleetGoal.met = fmt.Sprintf("%d (%.1f KiB each)", fleet, perConsumerKiB), fleet >= goalFleet
	}
	return append(g, fleetGoal)
}

// goalsMarkdown is the goals section, when any goal's measurement ran.
func (r *report) goalsMarkdown(b *strings.Builder) {
	g := r.goals()
	if len(g) == 0 {
		return
	}
	b.WriteString("## Goals\n\nThe performance goals (issue 34), judged on what this run measured below. The times hold for this machine on this day only: compare runs by the same-run references (`kubectl version --client` for the CLI, the scale floor for the provider's scale).\n\n| measurement | goal | this run | met |\n|---|---|---|---|\n")
	for _, x := range g {
		met := "no"
		if x.met {
			met = "yes"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", x.what, x.target, x.measured, met)
	}
	b.WriteString("\n")
}

// secs is d in seconds with one decimal, for durations of seconds.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
