package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

type capture struct {
	events.EventRecorder
	note string
}

func (c *capture) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	c.note = note
	if len(args) == 1 {
		c.note = args[0].(string)
	}
}

func TestShortNotes(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		wantLen int
		cut     bool
	}{
		"short is kept":           {in: "binding x", wantLen: 9},
		"exactly the limit":       {in: strings.Repeat("a", maxNote), wantLen: maxNote},
		"long is cut":             {in: strings.Repeat("a", 5000), cut: true},
		"cut on a rune boundary":  {in: strings.Repeat("é", 2000), cut: true},
		"percent signs are plain": {in: "100% of %s", wantLen: 10},
	} {
		t.Run(name, func(t *testing.T) {
			c := &capture{}
			ShortNotes(c).Eventf(nil, nil, "Warning", "R", "A", "%s", tc.in)
			if len(c.note) > maxNote || !utf8.ValidString(c.note) {
				t.Fatalf("note of %d bytes, valid UTF-8 %t", len(c.note), utf8.ValidString(c.note))
			}
			if tc.cut != strings.HasSuffix(c.note, "[…]") {
				t.Fatalf("cut = %t, note ends %q", !tc.cut, c.note[max(0, len(c.note)-10):])
			}
			if !tc.cut && len(c.note) != tc.wantLen {
				t.Fatalf("note of %d bytes, want %d", len(c.note), tc.wantLen)
			}
		})
	}
}
