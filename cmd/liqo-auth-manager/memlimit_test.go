package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                int64
	}{
		{"cgroup v2 limit", "memory.max", "268435456\n", 268435456},
		{"cgroup v2 unlimited", "memory.max", "max\n", 0},
		{"cgroup v1 limit", "memory/memory.limit_in_bytes", "268435456\n", 268435456},
		{"cgroup v1 unlimited", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"nothing to read", "", "", 0},
		{"garbage", "memory.max", "lots\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.file != "" {
				p := filepath.Join(root, tc.file)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := containerMemoryLimit(root); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSetMemoryLimitLeavesGOMEMLIMIT(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("268435456"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := setMemoryLimit(root); got != 0 {
		t.Fatalf("set %d although GOMEMLIMIT is set", got)
	}
}

func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	if !setGCPercent() {
		t.Fatal("GOGC unset: the manager's setting is not applied")
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Fatalf("collector setting %d, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "200")
	if setGCPercent() {
		t.Fatal("GOGC set: the manager overrode it")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("collector setting %d, want the one in force (100)", got)
	}
}
