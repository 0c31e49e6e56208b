package cli

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// outputFormats are the -o values every structured printer is checked with.
var outputFormats = []string{"json", "yaml", "name", "jsonpath={..}", "jsonpath-as-json={..}", "go-template={{.}}", "template={{.}}"}

// checkEscaped fails when out holds a rune a terminal would act on.
func checkEscaped(t testing.TB, what, out string) {
	t.Helper()
	for i, r := range out {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(out[i:]); size == 1 {
				t.Fatalf("%s prints invalid UTF-8 at %d: %q", what, i, out)
			}
		}
		if authv1beta1.UnsafeTextIndex(string(r)) >= 0 {
			t.Fatalf("%s prints %U raw: %q", what, r, out)
		}
	}
}

// formatFlags is -o format, without a testing.T (fuzzing builds many).
func formatFlags(format string) *OutputFlags {
	o := &OutputFlags{}
	cmd := &cobra.Command{Use: "x"}
	o.AddFlags(cmd, "")
	_ = cmd.Flags().Set("output", format)
	return o
}

// FuzzOutputEscapes: a string another cluster wrote, wherever it sits in a report (a
// value, a key, a list) or an object (data, labels), printed in every -o format and in a
// progress line, never reaches the terminal with a control character, a C1 control or a
// bidirectional override unescaped.
func FuzzOutputEscapes(f *testing.F) {
	for _, s := range []string{"plain", "red \x1b[31m", "csi \u009b31m", "bidi \u202eevil", "nul \x00", "bad \xff utf-8", "del \x7f", "lrm \u200e", "multi\nline\ttab"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data := map[string]any{"reason": s, s: []any{s, map[string]any{"detail": s}}, "n": 1}
		obj := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", Annotations: map[string]string{"a": s}}, Data: map[string]string{s: s}}
		for _, format := range outputFormats {
			var b bytes.Buffer
			if format != "name" {
				if err := formatFlags(format).PrintData(&b, data); err != nil {
					t.Fatalf("-o %s: %v", format, err)
				}
			}
			if err := formatFlags(format).PrintObjects(&b, obj); err != nil {
				t.Fatalf("-o %s: %v", format, err)
			}
			checkEscaped(t, "-o "+format, b.String())
		}
		var b bytes.Buffer
		p := NewPrinter(&b, 0).Scoped("remote")
		p.Info("%s", s)
		p.Warn("condition %s: %s", s, s)
		checkEscaped(t, "a progress line", b.String())
	})
}

func TestSanitizeValue(t *testing.T) {
	got := SanitizeValue(map[string]any{"k\u202e": []any{"\u009b", int64(1)}, "s": "ok"})
	want := map[string]any{`k\u202e`: []any{`\u009b`, int64(1)}, "s": "ok"}
	assert.Equal(t, want, got)
}

func TestSanitizeJSONKeepsOrderAndEscapes(t *testing.T) {
	raw := []byte(`{"z":"\u202e","a":[1,"\u009b",{"k\u0007":null,"b":true}],"n":1.5e3}`)
	got, err := sanitizeJSON(raw)
	assert.NoError(t, err)
	assert.Equal(t, `{"z":"\\u202e","a":[1,"\\u009b",{"k\\a":null,"b":true}],"n":1.5e3}`, string(got))
}
