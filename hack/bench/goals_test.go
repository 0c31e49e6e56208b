package main

import (
	"strings"
	"testing"
	"time"
)

// rounds is n rounds of d each.
func rounds(n int, d time.Duration) []time.Duration {
	r := make([]time.Duration, n)
	for i := range r {
		r[i] = d
	}
	return r
}

// TestGoalsJudgeWhatTheRunMeasured: each goal is judged on its own measurement of the run,
// the scale run of 1000 against the floor of its writes by their principals of the same
// run too, and the fleet from the largest run's live heap; a goal whose measurement did
// not run is not listed.
func TestGoalsJudgeWhatTheRunMeasured(t *testing.T) {
	const ms = time.Millisecond
	r := &report{
		auth: []*latency{
			{name: "authenticate, " + modeInProcess, rounds: rounds(20, 150*ms)},
			{name: "authenticate, " + modeManager, rounds: rounds(20, 101*ms)},
			{name: "authenticate, " + modePeeringUser, rounds: rounds(20, 99*ms)},
		},
		cli: &cliCost{version: rounds(10, 15*ms), help: rounds(10, 21*ms), kubectl: rounds(10, 40*ms)},
		scale: []*scaleResult{
			{n: 1000, total: 29 * time.Second, peakRSSMiB: 96},
			// 3000 consumers grew the live heap from 4 to 64 MiB: 20.48 KiB each, 12,040
			// under 320Mi (12,039.99..., in floating point: Fleet truncates).
			{n: 3000, total: 90 * time.Second, heapIdleMiB: 4, heapMiB: 64},
		},
		scaleFloor: []*scaleFloorResult{
			{n: 1000, total: 22 * time.Second},
			{n: 1000, total: 30 * time.Second, asPrincipals: true},
		},
		sliceScale: &sliceScaleResult{consumers: 20, perConsumer: 5, total: 4100 * ms},
	}
	want := map[string]bool{
		"authenticate, controllers in-process, p50":                             true,
		"authenticate, controllers manager, p50":                                false,
		"authenticate, peering user, controllers manager, p50":                  true,
		"`liqoctl version --client`, p50":                                       true,
		"`liqoctl --help`, p50":                                                 false,
		"1000 consumers, total":                                                 false,
		"1000 consumers, manager peak RSS":                                      true,
		"1000 consumers, total, against their writes alone by their principals": true,
		"largest fleet measured":                                                true,
		"consumers one manager holds within the release manifest's 320Mi (from the live heap at 3000)": true,
		"100 slices, total": false,
	}
	got := map[string]goal{}
	for _, g := range r.goals() {
		got[g.what] = g
	}
	for what, met := range want {
		g, ok := got[what]
		switch {
		case !ok:
			t.Errorf("no goal %q", what)
		case g.met != met:
			t.Errorf("%q (%s, goal %s): met %t, want %t", what, g.measured, g.target, g.met, met)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d goals, want %d: %v", len(got), len(want), got)
	}
	if m := got["`liqoctl version --client`, p50"].measured; !strings.Contains(m, "38 % of `kubectl version --client`'s 40 ms") {
		t.Errorf("liqoctl's start is not shown against kubectl's: %q", m)
	}
	if m := got["consumers one manager holds within the release manifest's 320Mi (from the live heap at 3000)"].measured; !strings.HasPrefix(m, "12039 ") {
		t.Errorf("fleet %q, want 12039", m)
	}

	if m := got["1000 consumers, total, against their writes alone by their principals"].measured; m != "29.0 s (0.97 × the floor)" {
		t.Errorf("the run against its floor shows %q", m)
	}

	// Past the floor's margin, the scale goal is not met; a largest run with failures has
	// its fleet not judged (its live heap holds fewer consumers than it counts); a
	// measurement without rounds is not judged at all.
	worse := &report{
		auth:       []*latency{{name: "authenticate, " + modeManager}},
		cli:        &cliCost{version: rounds(10, 15*ms)},
		scale:      []*scaleResult{{n: 1000, total: 34 * time.Second}, {n: 3000, total: 90 * time.Second, failed: 2, heapIdleMiB: 4, heapMiB: 5}},
		scaleFloor: []*scaleFloorResult{{n: 1000, total: 30 * time.Second, asPrincipals: true}},
	}
	gotWorse := map[string]goal{}
	for _, g := range worse.goals() {
		gotWorse[g.what] = g
	}
	if g := gotWorse["1000 consumers, total, against their writes alone by their principals"]; g.met {
		t.Errorf("1.13 times the floor is met: %+v", g)
	}
	if g := gotWorse["consumers one manager holds within the release manifest's 320Mi (from the live heap at 3000)"]; g.met || !strings.HasPrefix(g.measured, "not judged: 2 handshakes failed") {
		t.Errorf("the fleet of a run with failures is judged: %+v", g)
	}
	for what := range gotWorse {
		if strings.HasPrefix(what, "authenticate") || strings.HasPrefix(what, "`liqoctl --help`") {
			t.Errorf("%q is judged without a round", what)
		}
	}

	// A run of the latencies alone judges them alone.
	only := (&report{auth: r.auth[:1]}).goals()
	if len(only) != 1 {
		t.Errorf("a run of the in-process latency alone judges %d goals: %v", len(only), only)
	}
	if md := (&report{}).markdown(); strings.Contains(md, "## Goals") {
		t.Error("a run that measured nothing has a goals section")
	}
}
