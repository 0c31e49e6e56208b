package handshake

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

type lines []string

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func (l *lines) Info(format string, args ...any) { *l = append(*l, sprintf(format, args...)) }
func (l *lines) Warn(format string, args ...any) { *l = append(*l, "WARN "+sprintf(format, args...)) }

// TestRemovalReports: a removal names what was there, and says plainly when nothing was.
func TestRemovalReports(t *testing.T) {
	for _, tc := range []struct {
		removed []string
		want    string
	}{
		{nil, "No Identity, kubeconfig or signed nonce left: nothing to remove"},
		{[]string{"Identity"}, "Identity removed"},
		{[]string{"Identity", "kubeconfig", "signed nonce"}, "Identity, kubeconfig and signed nonce removed"},
	} {
		var l lines
		removedOrNothing(&l, "Identity, kubeconfig or signed nonce", tc.removed)
		if len(l) != 1 || l[0] != tc.want {
			t.Errorf("%v: %q, want %q", tc.removed, l, tc.want)
		}
	}
}

// TestUnknownPeerError: a miss names the flag and value and lists the known peers.
func TestUnknownPeerError(t *testing.T) {
	err := UnknownPeerError("cl-typo", "--remote-cluster-id", []string{"cl-a", "cl-b"})
	if !errors.Is(err, ErrUnknownPeer) || !strings.Contains(err.Error(), `--remote-cluster-id "cl-typo": unknown cluster: the peers this cluster knows are cl-a, cl-b`) {
		t.Fatal(err)
	}
	err = UnknownPeerError("cl-typo", "--consumer-cluster-id", nil)
	if !strings.Contains(err.Error(), "this cluster knows no peer at all") {
		t.Fatal(err)
	}
}
