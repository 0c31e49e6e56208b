package verify

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func outputFlags(format string) *cli.OutputFlags {
	o := &cli.OutputFlags{}
	cmd := &cobra.Command{Use: "x"}
	o.AddFlags(cmd, "")
	if format != "" {
		_ = cmd.Flags().Set("output", format)
	}
	return o
}

// sample is a report with s wherever the other cluster's words can appear: names, and
// details quoting its answers.
func sample(s string) *Report {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	skew := 0.5
	p := peer{&Peer{Consumer: s, Provider: s, Expires: &at, RenewsAt: &at, ClockSkewSeconds: &skew, Checks: []Check{}}}
	p.add(s, ResultFail, "%s", s)
	p.add("permissions", ResultFail, "in ns, missing %s; extra none", s)
	p.summarize(s)
	return &Report{Peers: []Peer{*p.Peer}}
}

// FuzzVerifyEscapes: whatever the other cluster wrote into what verify prints, no format
// prints a control character, a C1 control or a bidirectional override raw.
func FuzzVerifyEscapes(f *testing.F) {
	for _, s := range []string{"cl-a", "\x1b[2J", "\u009b2J", "\u202e", "\xfe", "a\nb\tc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, format := range []string{"", "json", "yaml", "jsonpath={..}", "go-template={{.}}"} {
			var b bytes.Buffer
			require.NoError(t, printReport(&b, sample(s), outputFlags(format)))
			if i := cli.Unsafe(b.String()); i >= 0 {
				t.Fatalf("-o %q prints an unsafe rune at %d: %q", format, i, b.String())
			}
		}
	})
}

func TestPermissionsSummary(t *testing.T) {
	many := []string{"a:get", "b:get", "c:get", "d:get", "e:get"}
	assert.Empty(t, permissionsSummary("tn", 5, many[:1], nil), "a few items need no summary")
	assert.Contains(t, permissionsSummary("tn", 5, many, nil), "5 missing, 0 extra of the tenant role's 5 permissions (a:get, b:get, c:get and 2 more): likely the tenant's access is not granted")
	assert.Contains(t, permissionsSummary("tn", 5, nil, many), "likely a RoleBinding in tn grants more than the tenant role")
	assert.Contains(t, permissionsSummary("tn", 5, many[:2], many[2:]), "likely the tenant role differs")
}

// TestVerifyTableGolden: the table, one line per check, a long detail summarized, a
// multi-line one on one line; and -o json, every item kept (testdata, -update).
func TestVerifyTableGolden(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := peer{&Peer{Consumer: "cl-a", Provider: "cl-b", Expires: &at, RenewsAt: &at, Checks: []Check{}}}
	p.add("identity", ResultPass, "Identity liqo-tenant-cl-b/controlplane-cl-b, certificate 1f for cl-a")
	p.add(CheckKubeconfig, ResultPass, "kubeconfig Secret liqo-tenant-cl-b/kubeconfig-controlplane-cl-b holds the Identity's certificate, CA and API server")
	missing := []string{"authentication.liqo.io/renews:get", "authentication.liqo.io/resourceslices:create", "authentication.liqo.io/resourceslices:get", "authentication.liqo.io/tenants:get"}
	p.add("permissions", ResultFail, "in liqo-tenant-cl-a, missing %s; extra none", strings.Join(missing, ", "))
	p.summarize(permissionsSummary("liqo-tenant-cl-a", len(missing), missing, nil))
	p.add("cluster-wide", ResultPass, "no permission granted in every namespace")
	p.add(CheckEveryNamespace, ResultSkip, "not checked: run verify with --remote-kubeconfig of the provider")
	// The other direction: a provider that refused the identity, whose answer spans
	// lines, and a clock that drifted.
	skew := 3.5
	q := peer{&Peer{Consumer: "cl-b", Provider: "cl-a", Expires: &at, ClockSkewSeconds: &skew, Checks: []Check{}}}
	q.add("identity", ResultPass, "Identity liqo-tenant-cl-a/controlplane-cl-a, certificate 2e for cl-b")
	q.add("authentication", ResultFail, "the provider refused the certificate:\n  Unauthorized\n  (TenantDrained at %s)", at.Format(time.RFC3339))
	q.add("clock-skew", ResultFail, "the provider's clock is %.1f s ahead of this cluster's (more than 2 s)", skew)
	q.add("expiry", ResultSkip, "no renewal scheduled: the tenant is drained")
	r := &Report{Peers: []Peer{*p.Peer, *q.Peer}}
	for format, file := range map[string]string{"": "verify.golden.txt", "json": "verify.golden.json"} {
		var b bytes.Buffer
		require.NoError(t, printReport(&b, r, outputFlags(format)))
		golden := filepath.Join("testdata", file)
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		assert.Equal(t, string(want), b.String(), "%s changed (go test ./pkg/cmd/verify -update rewrites it)", file)
	}
}
