package rotation

import (
	"strings"
	"testing"
)

// TestDecidePeer: each rule of one provider's move, in order; the first that applies wins.
func TestDecidePeer(t *testing.T) {
	const fp = "SHA256:new"
	old := peerFacts{peer: "p", cert: heldByOld, newFP: fp, server: "https://p:6443"}
	with := func(f peerFacts, change func(*peerFacts)) peerFacts { change(&f); return f }
	moved := with(old, func(f *peerFacts) { f.cert, f.moveTo, f.kubeconfigMoved, f.renew = heldByNew, fp, true, true })
	for _, tc := range []struct {
		name   string
		f      peerFacts
		state  State
		act    action
		runHas string
	}{
		{"no key holds the certificate", with(old, func(f *peerFacts) { f.cert = heldByNone }), CannotMove, doNothing, "liqoctl authenticate"},
		{"a Liqo provider cannot move", with(old, func(f *peerFacts) { f.liqo = true }), CannotMove, doNothing, "liqoctl unauthenticate"},
		{"Liqo wins over unreachable", with(old, func(f *peerFacts) { f.liqo, f.unreachable = true, "x" }), CannotMove, doNothing, "liqoctl unauthenticate"},
		{"unreachable is named", with(old, func(f *peerFacts) { f.unreachable = "dial tcp: refused" }), CannotMove, doNothing, "https://p:6443"},
		{"no Renew: request", old, Pending, doRequest, ""},
		{"a Renew of another rotation: request again", with(old, func(f *peerFacts) { f.renew = true }), Pending, doRequest, ""},
		{"requested, not answered: wait", with(old, func(f *peerFacts) { f.renew, f.renewForThis = true, true }), Requested, doNothing, "kubectl describe renew"},
		{"answered: take", with(old, func(f *peerFacts) { f.renew, f.renewForThis, f.answered = true, true, true }), Issued, doTake, ""},
		{"moved, kubeconfig not yet: wait", with(moved, func(f *peerFacts) { f.kubeconfigMoved = false }), Moved, doNothing, ""},
		{"moved: sign done", moved, Moved, doSignDone, ""},
		{"done signed: prove", with(moved, func(f *peerFacts) { f.doneSigned = true }), Moved, doProve, ""},
		{"Renew gone (deleted after the proof was lost): prove", with(moved, func(f *peerFacts) { f.renew = false }), Moved, doProve, ""},
		{"moved, unreachable: named", with(moved, func(f *peerFacts) { f.unreachable = "timeout" }), Moved, doNothing, "reachable"},
		{"proven, Renew left: delete it", with(moved, func(f *peerFacts) { f.proven = true }), Proven, doDeleteRenew, ""},
		{"proven", with(moved, func(f *peerFacts) { f.proven, f.renew = true, false }), Proven, doNothing, ""},
		{"new key, no move recorded (a handshake after the switch)", with(moved, func(f *peerFacts) { f.moveTo, f.renew = "", false }), Proven, doNothing, ""},
		{"a move recorded to another key does not count", with(moved, func(f *peerFacts) { f.moveTo = "SHA256:older" }), Proven, doDeleteRenew, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, a := decidePeer(tc.f)
			if p.State != tc.state || a != tc.act {
				t.Fatalf("got %s / action %d, want %s / action %d (%+v)", p.State, a, tc.state, tc.act, p)
			}
			if !strings.Contains(p.Run, tc.runHas) {
				t.Errorf("run %q does not say %q", p.Run, tc.runHas)
			}
			if p.Peer != "p" {
				t.Errorf("peer %q", p.Peer)
			}
		})
	}
}

// TestDecideCluster: the switch waits for every provider to move or be named; the
// retirement for every one proven, every slice moved and every Tenant re-sealed.
func TestDecideCluster(t *testing.T) {
	proven, cannot, moved := Progress{State: Proven}, Progress{State: CannotMove}, Progress{State: Moved}
	for _, tc := range []struct {
		name string
		f    clusterFacts
		want clusterAction
	}{
		{"nothing to do", clusterFacts{}, clusterWait},
		{"staged, no providers: switch", clusterFacts{next: true}, clusterSwitch},
		{"staged, one moving: wait", clusterFacts{next: true, peers: []Progress{proven, moved}}, clusterWait},
		{"staged, proven and one that cannot: switch", clusterFacts{next: true, peers: []Progress{proven, cannot}}, clusterSwitch},
		{"switched, one that cannot: no retirement", clusterFacts{previous: true, peers: []Progress{proven, cannot}}, clusterWait},
		{"switched, a slice on the previous key: wait", clusterFacts{previous: true, peers: []Progress{proven}, slicesOld: 1}, clusterWait},
		{"switched, a Tenant sealed by the previous key: wait", clusterFacts{previous: true, peers: []Progress{proven}, tenantsOld: 1}, clusterWait},
		{"switched, all proven: retire", clusterFacts{previous: true, peers: []Progress{proven, proven}}, clusterRetire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideCluster(tc.f); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}
