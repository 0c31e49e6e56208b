package startup

import (
	"os"
	"runtime/debug"
	"strconv"
	"testing"
)

// gogc is the collector setting the Go runtime derives from GOGC.
func gogc(t *testing.T) int {
	t.Helper()
	switch v := os.Getenv("GOGC"); v {
	case "":
		return 100
	case "off":
		return -1
	default:
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GOGC=%q: %v", v, err)
		}
		return n
	}
}

func TestDoneRestoresTheProcessSetting(t *testing.T) {
	want := gogc(t)
	if gcPercent != want {
		t.Fatalf("setting recorded at init = %d, want %d (GOGC)", gcPercent, want)
	}
	// The test binary's own packages run no code between init and here that
	// could have changed the setting: it must still be paused.
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("collector setting before Done = %d, want -1 (paused)", got)
	}
	for range 2 {
		Done()
		if got := debug.SetGCPercent(want); got != want {
			t.Fatalf("collector setting after Done = %d, want %d", got, want)
		}
	}
}
