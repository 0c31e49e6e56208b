package rotation

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatusStuck(t *testing.T) {
	proven, blocked, moving := Progress{Peer: "a", State: Proven}, Progress{Peer: "b", State: CannotMove}, Progress{Peer: "c", State: Requested}
	cases := []struct {
		name string
		st   Status
		want bool
	}{
		{"switched, only a blocked peer left", Status{Phase: Switched, Peers: []Progress{proven, blocked}}, true},
		{"switched, a peer still moving", Status{Phase: Switched, Peers: []Progress{blocked, moving}}, false},
		{"switched, nothing blocked", Status{Phase: Switched, Peers: []Progress{proven}}, false},
		{"staged: the switch comes first", Status{Phase: Staged, Peers: []Progress{proven, blocked}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.st.Stuck()) })
	}
}
