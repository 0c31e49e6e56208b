// Package architecture checks the rooms of docs/architecture.md: what each package may
// import from this module.
package architecture

import (
	"os/exec"
	"slices"
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

// The rooms of docs/architecture.md, by the short names the table uses.
const (
	wire    = "pkg/apis/authentication/wire"
	types   = "pkg/apis/authentication/v1beta1"
	crds    = "pkg/apis/crds"
	scheme  = "pkg/apis/scheme"
	version = "internal/version"
	startup = "internal/startup"
	sizing  = "internal/sizing"
)

// room is one row of the table: the packages it holds (a name, or a prefix ending in
// "/*" for every package below it) and what they may import from this module.
type room struct {
	pkg   string
	may   []string
	why   string
	extra []string // imports of one package of the room only, as pkg=import
}

// controllerImports is what every controller may import.
var controllerImports = []string{"pkg/controllers/shared/*", "pkg/issuer", "pkg/revocation", "pkg/metrics", "pkg/cluster", "pkg/access", "pkg/authn", wire, types}

// rooms is the whole table of docs/architecture.md, as an allow-list: every package of
// the module belongs to exactly one row, and imports only what its row allows. A new
// package fails until it has its row.
func rooms() []room {
	below := func(more ...string) []string {
		return append([]string{"pkg/cluster", "pkg/access", "pkg/revocation", "pkg/authn", "pkg/issuer", "pkg/metrics", wire, types, crds, scheme, version}, more...)
	}
	return []room{
		{pkg: wire, why: "the vocabulary imports nothing"},
		{pkg: types, why: "the API types import nothing of the module"},
		{pkg: crds, may: []string{types}, why: "the generated CRDs"},
		{pkg: scheme, may: []string{types, crds}, why: "the scheme"},
		{pkg: version, why: "build information"},
		{pkg: startup, why: "start-up tuning, imported first"},
		{pkg: sizing, why: "the manager's memory limit and the fleet it holds are numbers"},
		{pkg: "pkg/authn", may: []string{wire}, why: "pure protocol code, no client"},
		{pkg: "pkg/access", may: []string{wire, types}, why: "access rules are data"},
		{pkg: "pkg/revocation", may: []string{wire}, why: "proofs stand alone"},
		{pkg: "pkg/cluster", may: []string{"pkg/access", "pkg/authn", wire, types}, why: "a cluster's own state"},
		{pkg: "internal/installer", may: []string{"pkg/access", "pkg/cluster", "pkg/authn", wire, types, crds, sizing}, why: "making a cluster able to take part"},
		{pkg: "pkg/issuer", may: []string{"pkg/authn", wire, types}, why: "a library"},
		{pkg: "pkg/metrics", may: []string{"pkg/access", "pkg/cluster", wire, types}, why: "metrics read the cache and the records, and decide nothing"},
		{pkg: "pkg/controllers/shared/*", may: []string{"pkg/controllers/shared/*", "pkg/access", "pkg/cluster", "pkg/authn", "pkg/issuer", wire, types}, why: "what reconcilers share, one package per job"},
		{pkg: "pkg/controllers/peering", may: append([]string{"pkg/handshake"}, controllerImports...), why: "a declared peering runs liqoctl authenticate's steps (pkg/handshake), not a second implementation of them"},
		{pkg: "pkg/controllers/*", may: controllerImports, why: "one reconciler each, knowing nothing of the CLI nor of another controller (what they share is in pkg/controllers/shared)"},
		{pkg: "pkg/rotation", may: []string{"pkg/controllers/shared/acceptance", "pkg/controllers/shared/providerclient", "pkg/revocation", "pkg/cluster", "pkg/access", "pkg/authn", wire, types, scheme},
			why: "the key rotation's driver: the consumer's steps over the providers' Renews and the cluster's stage, switch and retire"},
		{pkg: "pkg/handshake", may: []string{"pkg/cluster", "pkg/access", "pkg/revocation", "pkg/authn", wire, types}, why: "the CLI's steps run no controller"},
		{pkg: "pkg/authmanager", may: below("pkg/controllers/*", "pkg/handshake", "pkg/rotation"), why: "the controllers of a role"},
		{pkg: "internal/cli", may: []string{"pkg/handshake", "pkg/cluster", wire, types, scheme, startup}, why: "kubectl's cmdutil for liqoctl: no controller, authmanager or installer"},
		{pkg: "internal/cmd/*", may: below("internal/cli", "pkg/handshake", "pkg/authmanager", "pkg/rotation", "internal/cmd/*"), why: "one command each; the installer only for install and uninstall",
			extra: []string{"internal/cmd/install=internal/installer", "internal/cmd/uninstall=internal/installer"}},
		{pkg: "internal/testenv", may: []string{"pkg/handshake", "pkg/authn", wire, types}, why: "control planes for tests, demos and benchmarks"},
		{pkg: "cmd/liqoctl", may: []string{"internal/cli", "internal/cmd/root", startup}, why: "main calls one Run"},
		{pkg: "cmd/liqo-auth-manager", may: []string{wire, scheme, "pkg/authmanager", "pkg/authn", "pkg/cluster", "pkg/controllers/providerslice", version, sizing}, why: "the manager's flags and Start"},
		{pkg: "cmd/devclusters", may: []string{"pkg/cluster", "internal/testenv"}, why: "local clusters"},
		{pkg: "hack/*", may: []string{"*"}, why: "build and measurement tools"},
	}
}

// matches says whether pkg is name, or below it when name ends in "/*" ("*" alone
// matches everything).
func matches(name, pkg string) bool {
	if name == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(name, "/*"); ok {
		return strings.HasPrefix(pkg, prefix+"/")
	}
	return pkg == name
}

// roomOf is the most specific row holding pkg.
func roomOf(pkg string) (room, bool) {
	var best room
	found := false
	for _, r := range rooms() {
		if matches(r.pkg, pkg) && (!found || len(r.pkg) > len(best.pkg) || strings.HasSuffix(best.pkg, "/*") && !strings.HasSuffix(r.pkg, "/*")) {
			best, found = r, true
		}
	}
	return best, found
}

// allowed says whether a package of room r named pkg may import imp.
func (r room) allowed(pkg, imp string) bool {
	for _, m := range r.may {
		if matches(m, imp) {
			return true
		}
	}
	return slices.Contains(r.extra, pkg+"="+imp)
}

// TestRoomsImportOnlyWhatTheirRowAllows checks every package of the module against the
// table of docs/architecture.md.
func TestRoomsImportOnlyWhatTheirRowAllows(t *testing.T) {
	got := imports(t)
	require.Contains(t, got, "internal/cli", "go list sees the module")
	for pkg, imps := range got {
		if strings.HasPrefix(pkg, "test/") {
			continue
		}
		r, ok := roomOf(pkg)
		if !assert.True(t, ok, "%s has no row in docs/architecture.md's table (test/architecture rooms): add one", pkg) {
			continue
		}
		for _, imp := range imps {
			assert.True(t, r.allowed(pkg, imp), "%s imports %s, which its row (%s: %s) does not allow", pkg, imp, r.pkg, r.why)
		}
	}
}

// TestAllowListFailsOnAViolation checks the check: a controller importing the CLI, the
// protocol code importing a cluster's state, an unknown package.
func TestAllowListFailsOnAViolation(t *testing.T) {
	for _, tc := range []struct{ pkg, imp string }{
		{"pkg/controllers/tenant", "internal/cli"},
		{"pkg/controllers/identity", "pkg/controllers/tenant"},
		{"pkg/controllers/providerslice", "pkg/controllers/tenant"},
		{"pkg/authn", "pkg/cluster"},
		{"internal/cli", "internal/installer"},
		{"internal/cmd/verify", "internal/installer"},
		{"pkg/handshake", "pkg/controllers/tenant"},
	} {
		r, ok := roomOf(tc.pkg)
		require.True(t, ok, tc.pkg)
		assert.False(t, r.allowed(tc.pkg, tc.imp), "%s importing %s must fail", tc.pkg, tc.imp)
	}
	_, ok := roomOf("pkg/newroom")
	assert.False(t, ok, "a package with no row fails")
	r, _ := roomOf("pkg/controllers/shared/status")
	assert.Equal(t, "pkg/controllers/shared/*", r.pkg, "the most specific row wins")
}

// TestProtocolCodeHasNoClient checks what pkg/authn links from outside the module: no
// Kubernetes client, no controller library, nothing that reaches a cluster.
func TestProtocolCodeHasNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"pkg/authn").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/rest", "k8s.io/client-go/transport", "k8s.io/client-go/plugin", "k8s.io/client-go/kubernetes",
			"k8s.io/client-go/tools/clientcmd", "sigs.k8s.io/controller-runtime"} {
			assert.False(t, dep == banned || strings.HasPrefix(dep, banned+"/") && !strings.HasPrefix(dep, "k8s.io/client-go/tools/clientcmd/api"),
				"pkg/authn links %s: pure protocol code reaches no cluster (the kubeconfig types and codec, clientcmd/api, are allowed)", dep)
		}
	}
}

// TestErrorsNameTheirSideThroughTheSide checks that no error names a side by a hand-typed
// prefix: Side.Errorf, Side.Explain and handshake.ScopedErrorf are the one way, so that a
// message about the provider cannot say "(local)".
func TestErrorsNameTheirSideThroughTheSide(t *testing.T) {
	assert.Empty(t, gitGrep(t, `Errorf\("\((local|remote)\) `), "errors with a hand-typed side prefix: use the side's Errorf (or handshake.ScopedErrorf before a Side exists)")
}

// gitGrep lists the lines of the module's Go files (tests excluded) matching the extended
// regular expression re, in the files of pathspecs (all Go files when none is given; an
// exclusion ":!path" alone excludes from all of them).
func gitGrep(t *testing.T, re string, pathspecs ...string) string {
	t.Helper()
	include := []string{}
	for _, p := range pathspecs {
		if !strings.HasPrefix(p, ":!") {
			include = append(include, p)
		}
	}
	if len(include) == 0 {
		pathspecs = append(pathspecs, "*.go")
	}
	cmd := exec.Command("git", append([]string{"grep", "-n", "-E", re, "--", ":!*_test.go"}, pathspecs...)...)
	cmd.Dir = "../.." // the module's root: git grep's pathspecs are relative to it
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return "" // git grep exits 1 when nothing matches
	}
	return string(out)
}

// TestReasonsHaveOneHome checks that condition and Event reasons are defined in the API
// package (pkg/authn keeps the protocol's own refusals, which import nothing), and that no
// controller passes a reason as a literal: a reason a user greps for, a test asserts and
// liqoctl explains is one constant.
func TestReasonsHaveOneHome(t *testing.T) {
	assert.Empty(t, gitGrep(t, `^\s*(const\s+)?[Rr]eason[A-Za-z]*\s*(Reason\s*)?=\s*"`, ":!pkg/apis/authentication/v1beta1/*", ":!pkg/authn/*"),
		"reasons defined outside pkg/apis/authentication/v1beta1/reasons.go")
	assert.Empty(t, gitGrep(t, `EventType(Normal|Warning), "|Reason: "[A-Z]|, (true|false), "[A-Z]`, "pkg/controllers/*.go", "pkg/handshake/*.go"),
		"reasons passed as literals: name them in pkg/apis/authentication/v1beta1/reasons.go")
}

// TestLibraryStandsWithoutTheCLI checks the line between the library and the rest: what is
// under pkg/ (the API, the protocol, the handshake, the controllers and their setup) is the
// public API, and imports nothing under internal/ (the CLI, the installer, the test
// environment) but the build information the manager announces on its Lease.
func TestLibraryStandsWithoutTheCLI(t *testing.T) {
	for pkg, imps := range imports(t) {
		if !strings.HasPrefix(pkg, "pkg/") {
			continue
		}
		for _, imp := range imps {
			assert.False(t, strings.HasPrefix(imp, "internal/") && imp != version,
				"%s (public API) imports %s: the library may not depend on the CLI or its tools", pkg, imp)
		}
	}
}
