package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// TestBenchmarkProgram runs `make bench`'s program end to end, small: static
// liqoctl and liqo-auth-manager, two rounds of every latency measurement, a
// scale run of three consumers, a scale floor of twenty and a few CLI starts. It checks that every
// measurement ran and succeeded and that the report has every table; it never
// looks at how long anything took.
func TestBenchmarkProgram(t *testing.T) {
	// Serial: it builds static binaries and runs every benchmark: it computes.
	root, err := testenv.ModuleRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, goBuild(dir, "./cmd/liqoctl", "./cmd/liqo-auth-manager", "./hack/bench"))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(dir, "benchmarks.md")
	var stdout, stderr bytes.Buffer
	bench := exec.CommandContext(ctx, filepath.Join(dir, "bench"), "--bin", dir, "--out", report, "--rounds", "2", "--cli-rounds", "3", "--scale", "3", "--slice-consumers", "2", "--slices-each", "2", "--floor-scale", "20")
	bench.Dir = root
	// The program's own temp dirs go under the test's, so they go even if it is killed.
	bench.Env = append(os.Environ(), "TMPDIR="+dir)
	bench.Stdout, bench.Stderr = &stdout, &stderr
	require.NoError(t, bench.Run(), stderr.String())

	md, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Equal(t, stdout.String(), string(md), "the report printed and the report written differ")
	text := string(md)
	for _, section := range []string{
		"## Latency", "### Steps of authenticate, controllers in-process", "### Steps of authenticate, controllers manager",
		"### Steps of authenticate, peering user, controllers manager",
		"## Floor", "## Provider scale", "## Scale floor", "## Slice scale", "## CLI cost", "Binary sizes: liqoctl ",
	} {
		require.Contains(t, text, section)
	}
	for _, row := range []string{
		"authenticate, controllers in-process", "authenticate, controllers manager", "manual flow (4 steps, scripted)",
		"unauthenticate (after controllers in-process)", "unauthenticate (after controllers manager)",
		"authenticate, peering user, controllers manager", "unauthenticate (after peering user, controllers manager)",
		"create resourceslice (to a working kubeconfig), controllers manager", "delete resourceslice (with its proof), controllers manager",
	} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\| `+regexp.QuoteMeta(row)+` \| 2 \| \d+ ms \| \d+ ms \| \d+ ms \|$`), text)
	}
	// Every handshake step line appears in the three step tables (in bold where it is the slowest).
	for _, step := range []string{"Nonce is signed", "Tenant status is filled", "Identity status is filled"} {
		rows := regexp.MustCompile(`(?m)^\| (\*\*)?\((local|remote)\) ` + regexp.QuoteMeta(step) + `(\*\*)? \| \d+ ms \| \d+ ms \|$`)
		require.Len(t, rows.FindAllString(text, -1), 3, "step %q in the three step tables:\n%s", step, text)
	}
	// Three consumers, none failed; where their CPU went, and what they asked of the API
	// server.
	require.Regexp(t, regexp.MustCompile(`(?m)^\| 3 \| \d+ ms \| [\d.]+ \| \d+ ms \| \d+ ms \| 0 \| \d+ \| \d+ MiB \| [\d.]+ MiB \| -?[\d.]+ KiB \| [\d.]+ s \| \d+ ms \| \d+ ms \|$`), text)
	require.Regexp(t, regexp.MustCompile(`(?m)^\| 3 \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \| \d+ ms \|$`), text)
	require.Regexp(t, regexp.MustCompile(`(?m)^\| request POST tenants \| 1\.0 \|$`), text, "each consumer created one Tenant")
	// The floor: each building block timed alone, and the idle manager's memory.
	for _, row := range []string{"GET a ConfigMap", "create a Secret", "SubjectAccessReview", "update a Tenant's status", "CSR signed (create, approve, certificate seen)"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\| `+regexp.QuoteMeta(row)+` \| 2 \| [\d.]+ ms \| [\d.]+ ms \|$`), text)
	}
	require.Regexp(t, regexp.MustCompile(`liqo-auth-manager idle, 5 s after it started on a provider without tenants: [\d.]+ MiB resident, of which [\d.]+ MiB anonymous`), text)
	// The scale floor's twenty handshakes' writes, by the administrator, then by their
	// principals (a write refused while the authorizer has not seen a binding yet is retried).
	for _, by := range []string{"the administrator", "their principals"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\| `+by+` \| 20 \| \d+ ms \| [\d.]+ \| \d+ \|`), text)
	}
	// Four slices (two consumers, two each), none failed.
	require.Regexp(t, regexp.MustCompile(`(?m)^\| 4 \| \d+ ms \| [\d.]+ \| \d+ ms \| \d+ ms \| 0 \| \d+ MiB \| [\d.]+ s \| \d+ ms \|$`), text)
	require.NotContains(t, text, "First failure")
	require.Regexp(t, regexp.MustCompile("(?m)^\\| `liqoctl version --client` \\| \\d+ ms \\| \\d+ ms \\|$"), text)
	require.Regexp(t, regexp.MustCompile("(?m)^\\| `liqoctl --help` \\| \\d+ ms \\| \\d+ ms \\|$"), text)
}
