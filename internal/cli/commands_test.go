package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestExit: an interruption exits 130 saying to re-run, whatever error it caused on the
// way (a wait cut short, a raw "context canceled", even a timeout message); any other
// failure exits 1 with its own error.
func TestExit(t *testing.T) {
	failed := errors.New("forbidden")
	timedOut := fmt.Errorf("timed out waiting for the Tenant: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name        string
		interrupted bool
		err         error
		code        int
		want        error
	}{
		{"success", false, nil, 0, nil},
		{"success after a signal", true, nil, 0, nil},
		{"failure", false, failed, 1, failed},
		{"timeout", false, timedOut, 1, timedOut},
		{"interrupted wait", true, timedOut, 130, ErrInterrupted},
		{"interrupted request", true, fmt.Errorf("(remote) applying the Tenant: %w", context.Canceled), 130, ErrInterrupted},
		{"interrupted, said by a step", false, fmt.Errorf("step: %w", ErrInterrupted), 130, ErrInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, err := Exit(tc.interrupted, tc.err)
			if code != tc.code || !errors.Is(err, tc.want) {
				t.Fatalf("Exit(%v, %v) = %d, %v; want %d, %v", tc.interrupted, tc.err, code, err, tc.code, tc.want)
			}
		})
	}
	if ErrInterrupted.Error() != "interrupted; re-run to resume" {
		t.Fatalf("ErrInterrupted says %q", ErrInterrupted)
	}
}

// TestConfirm: only yes goes ahead; a stdin that is not a terminal is refused, saying
// how to go ahead without a question.
func TestConfirm(t *testing.T) {
	for answer, ok := range map[string]bool{"y\n": true, "YES\n": true, " yes \n": true, "n\n": false, "\n": false, "": false, "sure\n": false} {
		var out bytes.Buffer
		err := confirm(strings.NewReader(answer), &out, true, "Remove everything.")
		if ok != (err == nil) {
			t.Errorf("answer %q: %v", answer, err)
		}
		if !strings.Contains(out.String(), "Remove everything.\nGo ahead? [y/N]: ") {
			t.Errorf("prompt: %q", out.String())
		}
	}
	var out bytes.Buffer
	err := confirm(strings.NewReader("y\n"), &out, false, "Remove everything.")
	if err == nil || !strings.Contains(err.Error(), "pass --skip-confirm") || out.Len() != 0 {
		t.Fatalf("not a terminal: %v, %q", err, out.String())
	}
}
