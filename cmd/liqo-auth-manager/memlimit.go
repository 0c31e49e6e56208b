package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/liqo-auth/liqo-auth/internal/sizing"
)

// containerMemoryLimit reads the memory limit of the cgroup the process sees at root
// (/sys/fs/cgroup): cgroup v2's memory.max, else v1's memory.limit_in_bytes. It returns 0
// when there is none ("max", v1's unlimited value, no such file).
func containerMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 { // "max", or v1's page-rounded MaxInt64
			return 0
		}
		return n
	}
	return 0
}

// setMemoryLimit gives the Go runtime a soft memory limit under the container's (the
// release manifest sets 320Mi), unless GOMEMLIMIT already sets one: without it the heap
// may grow to twice what is live before a collection, and a manager whose live heap is
// half its limit would be killed for garbage. It returns the limit set (0: none).
func setMemoryLimit(root string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := containerMemoryLimit(root)
	if limit == 0 {
		return 0
	}
	soft := int64(float64(limit) * sizing.MemoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// gcPercent is the manager's collector setting unless GOGC says otherwise: the heap may
// grow to one and a half times what is live, not twice. The manager's heap is mostly its
// cache, which grows with the fleet; the collector's work is small next to the
// handshakes' (docs/operations.md, "Sizing a provider").
const gcPercent = 50

// setGCPercent sets gcPercent unless GOGC is set, and says whether it did.
func setGCPercent() bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(gcPercent)
	return true
}
