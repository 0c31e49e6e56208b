package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildLiqoctl builds this command the way the Makefile and the release do
// (static, trimmed) and returns the binary's path.
func buildLiqoctl(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build liqoctl: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "liqoctl")
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestStartupRunsNoGarbageCollection runs the real binary with the runtime's
// GC and init tracing, which the runtime writes in order to the same stream:
// no collection may start before the last package is initialized, and the
// collector pause must begin before the packages that allocate most at init.
// (A command that allocates enough after main starts may collect then.)
func TestStartupRunsNoGarbageCollection(t *testing.T) {
	bin := buildLiqoctl(t)
	inits := regexp.MustCompile(`^init (\S+) @`)
	for _, args := range [][]string{{"version", "--client"}, {"--help"}, {"completion", "bash"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1,inittrace=1", "GOGC=", "GOMEMLIMIT=")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("liqoctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			if stdout.Len() == 0 {
				t.Fatalf("liqoctl %s printed nothing on stdout", strings.Join(args, " "))
			}
			order := map[string]int{}
			collected := false
			for i, line := range strings.Split(stderr.String(), "\n") {
				collected = collected || strings.HasPrefix(line, "gc ")
				if m := inits.FindStringSubmatch(line); m != nil {
					order[m[1]] = i
					if collected {
						t.Fatalf("a collection ran during package initialization, before %s:\n%s", m[1], stderr.String())
					}
				}
			}
			pause, ok := order["github.com/liqo-auth/liqo-auth/internal/startup"]
			if !ok {
				t.Fatalf("no init trace for internal/startup; is it still imported by main?\n%s", stderr.String())
			}
			for _, heavy := range []string{
				"k8s.io/client-go/kubernetes/scheme",
				"sigs.k8s.io/controller-runtime/pkg/client/apiutil",
				"k8s.io/api/core/v1",
			} {
				i, ok := order[heavy]
				if !ok {
					t.Errorf("no init trace for %s: update this list to the heaviest packages liqoctl links", heavy)
					continue
				}
				if i < pause {
					t.Errorf("%s initializes before the collector pause begins (position %d < %d)", heavy, i, pause)
				}
			}
		})
	}
}
