package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pterm/pterm"
	"golang.org/x/term"

	"github.com/liqo-auth/liqo-auth/internal/startup"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// Printer prints progress lines on stderr: "INFO (local) message". On a terminal the
// lines are styled with pterm; otherwise they are plain, one line per step.
type Printer struct {
	w       io.Writer
	scope   string
	styled  bool
	verbose int
	mu      *sync.Mutex
	start   time.Time
}

// NewPrinter returns a printer writing to w. Styling is on only when w is a terminal and
// NO_COLOR is unset.
func NewPrinter(w io.Writer, verbose int) *Printer {
	styled := false
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == "" {
		styled = true
	}
	return &Printer{w: w, styled: styled, verbose: verbose, mu: &sync.Mutex{}, start: startup.Began()}
}

// Scoped returns a printer whose lines say which cluster they are about.
func (p *Printer) Scoped(scope string) *Printer {
	q := *p
	q.scope = scope
	return &q
}

// Info prints a step that happened.
func (p *Printer) Info(format string, args ...any) { p.line(pterm.Info, "INFO", format, args...) }

// Warn prints something the user should look at.
func (p *Printer) Warn(format string, args ...any) { p.line(pterm.Warning, "WARN", format, args...) }

// Debug prints only with -v.
func (p *Printer) Debug(format string, args ...any) {
	if p.verbose > 0 {
		p.line(*pterm.Debug.WithDebugger(false), "DEBUG", format, args...)
	}
}

// Error prints a failure; liqoctl's main uses it once, for the error a command returns.
func (p *Printer) Error(err error) { p.line(pterm.Error, "ERROR", "%v", err) }

func (p *Printer) line(pp pterm.PrefixPrinter, level, format string, args ...any) {
	msg := Sanitize(fmt.Sprintf(format, args...))
	if p.verbose > 0 {
		// With -v every line carries the time since the process started, so the
		// slowest step of a handshake is visible.
		msg = fmt.Sprintf("[%6.3fs] %s", time.Since(p.start).Seconds(), msg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.styled {
		if p.scope != "" {
			pp = *pp.WithScope(pterm.Scope{Text: p.scope, Style: pterm.NewStyle(pterm.FgGray)})
		}
		pp.WithWriter(p.w).Println(msg)
		return
	}
	if p.scope != "" {
		fmt.Fprintf(p.w, "%s (%s) %s\n", level, p.scope, msg)
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", level, msg)
}

// Sanitize makes text safe to print on a terminal: control characters (escape sequences
// that move the cursor, rewrite the title or hide what follows), C1 controls, and Unicode
// bidirectional overrides are shown escaped ("\x1b", "\u202e") instead of acting. Messages
// liqoctl prints often quote the other cluster's words (a condition, an error); what that
// cluster wrote must never drive this terminal. Newlines and tabs are kept. It is the
// escaping the controllers apply to what they store (authv1beta1.EscapeText).
func Sanitize(s string) string { return authv1beta1.EscapeText(s) }

// Unsafe is the index of the first rune of s that Sanitize escapes, -1 when none: for
// tests that check a printer's output.
func Unsafe(s string) int { return authv1beta1.UnsafeTextIndex(s) }
