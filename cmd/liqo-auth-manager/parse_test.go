package main

import (
	"strings"
	"testing"
	"time"
)

func TestLeaderElectionTimings(t *testing.T) {
	f, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.leaseDuration != 15*time.Second || f.renewDeadline != 10*time.Second || f.retryPeriod != 2*time.Second {
		t.Errorf("defaults %s/%s/%s, want client-go's 15s/10s/2s", f.leaseDuration, f.renewDeadline, f.retryPeriod)
	}
	if _, err := parse([]string{"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"}); err != nil {
		t.Errorf("longer margins refused: %v", err)
	}
	for _, args := range [][]string{
		{"--leader-elect-renew-deadline=20s"},                                      // not under the lease
		{"--leader-elect-retry-period=10s"},                                        // not under the deadline
		{"--leader-elect-retry-period=0s"},                                         // never
		{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"}, // equal
	} {
		if _, err := parse(args); err == nil || !strings.Contains(err.Error(), "leader election") {
			t.Errorf("%v: %v, want the order explained", args, err)
		}
	}
}
