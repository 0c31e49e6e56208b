package main

import (
	"strings"
	"testing"
	"time"
)

// TestReportSaysWhereItStopped: a run stopped by a failed section still reports what it
// measured before, and says where it stopped; a complete run says nothing of the kind.
func TestReportSaysWhereItStopped(t *testing.T) {
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	measured := &latency{name: "authenticate, controllers in-process", rounds: []time.Duration{100 * time.Millisecond}}
	stopped := (&report{started: start, finished: start.Add(time.Minute), auth: []*latency{measured}, stopped: "scale 3000: the manager lost its Lease"}).markdown()
	for _, want := range []string{"**This run stopped early**: scale 3000: the manager lost its Lease.", "authenticate, controllers in-process"} {
		if !strings.Contains(stopped, want) {
			t.Errorf("the report of a stopped run lacks %q", want)
		}
	}
	if complete := (&report{started: start, finished: start.Add(time.Minute), auth: []*latency{measured}}).markdown(); strings.Contains(complete, "stopped early") {
		t.Error("a complete run's report says it stopped early")
	}
}
