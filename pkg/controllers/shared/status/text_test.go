package status

import (
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// noteRecorder keeps the notes of the Events it is given.
type noteRecorder struct{ notes []string }

func (n *noteRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	if len(args) == 1 {
		note, _ = args[0].(string)
	}
	n.notes = append(n.notes, note)
}

// FuzzStoredText sends what another cluster may write (a name, a reason, a CSR's subject
// quoted in a message) through the two places controllers store text: conditions and
// Events. Nothing stored holds a control character, a C1 control, invalid UTF-8 or a
// bidirectional override, which the CRDs would refuse and a terminal would obey.
func FuzzStoredText(f *testing.F) {
	for _, s := range []string{"plain", "esc \x1b[2J", "c1 \u009b31m", "bidi \u202e gnp.exe", "bad \xff utf8", "tab\tand\nnewline"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var conds []metav1.Condition
		SetCondition(&conds, "Ready", false, "Refused", "the peer wrote "+s, 1)
		if i := authv1beta1.UnsafeTextIndex(conds[0].Message); i >= 0 || !utf8.ValidString(conds[0].Message) {
			t.Fatalf("condition message %q holds an unsafe rune at %d", conds[0].Message, i)
		}
		rec := &noteRecorder{}
		ShortNotes(rec).Eventf(nil, nil, "Warning", "Refused", "Check", "the peer wrote %s", s)
		note := rec.notes[0]
		if i := authv1beta1.UnsafeTextIndex(note); i >= 0 || !utf8.ValidString(note) || len(note) > maxNote {
			t.Fatalf("event note %q holds an unsafe rune at %d (or is %d bytes)", note, i, len(note))
		}
	})
}
