package main

import (
	"os"
	"strings"
	"testing"
)

// TestSystemdUnit: the shipped unit restarts the manager whenever it exits (after a lost
// leader election, say) and never gives up, and its command line is one the manager
// accepts, beside a cluster.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile("../../deploy/systemd/liqo-auth-manager@.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"\nRestart=always\n", "\nStartLimitIntervalSec=0\n", "\nLoadCredential=kubeconfig:/etc/liqo-auth/%i.kubeconfig\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	var exec string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			exec = v
		}
	}
	args := strings.Fields(strings.NewReplacer("${CREDENTIALS_DIRECTORY}", "/run/credentials/x", "$LIQO_AUTH_MANAGER_ARGS", "--peer-gone-after=24h").Replace(exec))
	if len(args) < 2 || !strings.HasSuffix(args[0], "/liqo-auth-manager") {
		t.Fatalf("ExecStart=%s", exec)
	}
	f, err := parse(args[1:])
	if err != nil {
		t.Fatalf("the manager refuses the unit's flags: %v", err)
	}
	if f.kubeconfig != "/run/credentials/x/kubeconfig" || f.healthAddr != "0" || f.metricsAddr != "0" || f.opts.PeerGoneAfter.String() != "24h0m0s" {
		t.Fatalf("parsed %+v", f)
	}
}
