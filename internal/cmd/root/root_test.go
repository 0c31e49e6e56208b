package root

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func run(args ...string) (stdout, stderr string, err error) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(streams)
	cmd.SetArgs(args)
	// No cluster is reachable here: every case below must fail, or succeed, before any
	// command connects.
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestTyposFail: an unknown subcommand or argument fails, as kubectl's do, and never
// prints help on stdout (where `liqoctl generate tenants > tenant.yaml` would write it into
// a file and exit 0).
func TestTyposFail(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "foo"}, `unknown command "foo" for "liqoctl generate"`},
		{[]string{"generate", "tenat"}, `did you mean "tenant"?`},
		{[]string{"generate"}, "liqoctl generate needs one of its commands: identity, peering, peering-user, tenant"},
		{[]string{"create", "nonse"}, `unknown command "nonse" for "liqoctl create"`},
		{[]string{"get", "tenant"}, `unknown command "tenant" for "liqoctl get"`},
		{[]string{"delete", "foo"}, `unknown command "foo" for "liqoctl delete"`},
		{[]string{"cordon", "foo"}, `unknown command "foo" for "liqoctl cordon"`},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "liqoctl completion"`},
		{[]string{"completion"}, "liqoctl completion needs one of its commands"},
		{[]string{"install", "extra"}, `unknown command "extra" for "liqoctl install"`},
		{[]string{"version", "extra"}, `unknown command "extra" for "liqoctl version"`},
		{[]string{"generate", "tenant", "extra"}, `unknown command "extra" for "liqoctl generate tenant"`},
		{[]string{"foo"}, `unknown command "foo" for "liqoctl"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, _, err := run(tc.args...)
			if err == nil {
				t.Fatalf("liqoctl %v succeeded", tc.args)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("liqoctl %v: %v, want %q", tc.args, err, tc.want)
			}
			if out != "" {
				t.Fatalf("liqoctl %v printed on stdout:\n%s", tc.args, out)
			}
		})
	}
}

// TestGroupAloneHelpsOnStderr: a group run alone shows its commands, on stderr.
func TestGroupAloneHelpsOnStderr(t *testing.T) {
	_, errOut, err := run("generate")
	if err == nil || !strings.Contains(errOut, "peering-user") {
		t.Fatalf("liqoctl generate: %v\nstderr:\n%s", err, errOut)
	}
}

// TestAliases: the plural forms Liqo's users type name the same commands.
func TestAliases(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmd(streams)
	for alias, want := range map[string]string{
		"generate tenants":       "liqoctl generate tenant",
		"generate identities":    "liqoctl generate identity",
		"generate peering-users": "liqoctl generate peering-user",
		"create nonces":          "liqoctl create nonce",
		"get nonces":             "liqoctl get nonce",
		"delete peering-users":   "liqoctl delete peering-user",
		"delete resourceslices":  "liqoctl delete resourceslice",
		"create resourceslices":  "liqoctl create resourceslice",
		"cordon tenants":         "liqoctl cordon tenant",
		"unauth":                 "liqoctl unauthenticate",
		"auth":                   "liqoctl authenticate",
		"limit tenants":          "liqoctl limit tenant",
		"renew tenants":          "liqoctl renew tenant",
		"completion bash":        "liqoctl completion bash",
		"generate peeringuser":   "liqoctl generate peering-user",
		"uncordon tenants":       "liqoctl uncordon tenant",
		"drain tenants":          "liqoctl drain tenant",
		"delete peeringuser":     "liqoctl delete peering-user",
	} {
		c, _, err := root.Find(strings.Fields(alias))
		if err != nil || c.CommandPath() != want {
			t.Errorf("liqoctl %s: %v, %v; want %s", alias, pathOf(c), err, want)
		}
	}
}

func pathOf(c *cobra.Command) string {
	if c == nil {
		return "<nil>"
	}
	return c.CommandPath()
}

// TestEveryCommandIsStrict walks the tree: every command either groups others (and refuses
// an unknown one) or declares its positional arguments.
func TestEveryCommandIsStrict(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if strings.HasPrefix(sub.Name(), "__") || sub.Name() == "help" {
				continue
			}
			if sub.Args == nil {
				t.Errorf("%s accepts any argument", sub.CommandPath())
			}
			if !sub.Runnable() {
				t.Errorf("%s prints help and exits 0 when run", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(NewCmd(streams))
}

// TestNoFlagShadowsAGlobalOne: a command's own flag named like a global one (kubectl's
// --proxy-url, say) would silently take its place on that command.
func TestNoFlagShadowsAGlobalOne(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmd(streams)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if root.PersistentFlags().Lookup(f.Name) != nil {
				t.Errorf("%s --%s hides the global --%s", c.CommandPath(), f.Name, f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range root.Commands() {
		walk(c)
	}
}

// TestClusterIDFlagsComplete: every flag that names a peer completes cluster IDs, never
// file names (the shell's default).
func TestClusterIDFlagsComplete(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.HasSuffix(f.Name, "cluster-id") && f.Name != "cluster-id" {
				if _, ok := c.GetFlagCompletionFunc(f.Name); !ok {
					t.Errorf("%s --%s completes file names", c.CommandPath(), f.Name)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmd(streams))
}

// TestGroupsStillComplete: a group command completes its subcommands, and only them.
func TestGroupsStillComplete(t *testing.T) {
	out, _, err := run("__complete", "generate", "")
	if err != nil || !strings.Contains(out, "tenant") || !strings.Contains(out, "peering-user") || strings.Contains(out, ".go") {
		t.Fatalf("__complete generate: %v\n%s", err, out)
	}
}

// TestReportsDoNotAdvertiseName: commands that print a report (info, verify, version)
// neither advertise nor accept -o name, which names objects they do not print.
func TestReportsDoNotAdvertiseName(t *testing.T) {
	root := NewCmd(genericiooptions.NewTestIOStreamsDiscard())
	for _, name := range []string{"info", "verify", "version"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f := cmd.Flags().Lookup("output")
		if f == nil {
			t.Fatalf("%s has no -o", name)
		}
		if strings.Contains(f.Usage, "name") {
			t.Errorf("%s -o advertises name: %s", name, f.Usage)
		}
	}
}
