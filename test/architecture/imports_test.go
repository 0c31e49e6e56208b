// Package architecture checks the rooms of docs/architecture.md: what each package may
// import from this module.
package architecture

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/liqo-auth/liqo-auth/"

// imports lists, for every package of the module, the packages of the module it imports
// (tests excluded), with the module prefix cut.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	require.NoError(t, err)
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		got[pkg] = nil
		for _, imp := range f[1:] {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				got[pkg] = append(got[pkg], rest)
			}
		}
	}
	return got
}

// TestRoomsImportOnlyBelowThem checks the rules of docs/architecture.md.
func TestRoomsImportOnlyBelowThem(t *testing.T) {
	got := imports(t)
	require.Contains(t, got, "pkg/cli", "go list sees the module")
	rules := []struct {
		pkg       string
		forbidden []string
		why       string
	}{
		{"pkg/apis/authentication/wire", []string{"pkg/"}, "the vocabulary imports nothing"},
		{"pkg/authn", []string{"pkg/cluster", "pkg/access", "pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/installer", "pkg/authmanager"}, "pure protocol code, no client"},
		{"pkg/access", []string{"pkg/cluster", "pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/installer", "pkg/authmanager", "pkg/revocation"}, "access rules are data"},
		{"pkg/revocation", []string{"pkg/cluster", "pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/installer", "pkg/authmanager"}, "proofs stand alone"},
		{"pkg/cluster", []string{"pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/installer", "pkg/authmanager", "pkg/revocation"}, "a cluster's own state"},
		{"pkg/issuer", []string{"pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/authmanager"}, "a library"},
		{"pkg/metrics", []string{"pkg/controllers", "pkg/handshake", "pkg/cli", "pkg/installer", "pkg/authmanager"}, "metrics read the cache (and the tenant records, through cluster) and decide nothing"},
		{"pkg/controllers/", []string{"pkg/handshake", "pkg/cli", "pkg/authmanager", "pkg/cmd", "pkg/installer"}, "controllers know nothing of the CLI"},
		{"pkg/handshake", []string{"pkg/controllers", "pkg/cli", "pkg/authmanager", "pkg/cmd", "pkg/installer"}, "the CLI's steps run no controller"},
		{"pkg/cli", []string{"pkg/controllers", "pkg/authmanager", "pkg/cmd", "pkg/installer"}, "kubectl's cmdutil for liqoctl"},
	}
	for _, r := range rules {
		for pkg, imps := range got {
			if pkg != r.pkg && !(strings.HasSuffix(r.pkg, "/") && strings.HasPrefix(pkg, r.pkg)) {
				continue
			}
			for _, imp := range imps {
				for _, f := range r.forbidden {
					assert.False(t, strings.HasPrefix(imp, f), "%s imports %s (%s)", pkg, imp, r.why)
				}
			}
		}
	}
}
