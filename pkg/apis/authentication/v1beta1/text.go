package v1beta1

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// EscapeText makes text safe to store in a status and to print on a terminal: control
// characters (escape sequences that move the cursor, rewrite the title or hide what
// follows), C1 controls, invalid UTF-8 and Unicode bidirectional overrides are written
// escaped ("\x1b", "\u202e") instead of acting. Newlines and tabs are kept. Conditions and
// Events often quote what the other cluster wrote; the CRDs refuse such characters in
// messages, so a message is escaped before it is stored, and liqoctl escapes again
// whatever it prints.
func EscapeText(s string) string {
	if UnsafeTextIndex(s) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unsafeRune(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// UnsafeTextIndex is the index of the first rune of s that EscapeText escapes, -1 when
// none.
func UnsafeTextIndex(s string) int { return strings.IndexFunc(s, unsafeRune) }

func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError:
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c:
		return true
	}
	return false
}
