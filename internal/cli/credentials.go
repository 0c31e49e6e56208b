package cli

import (
	"errors"
	"fmt"
	"io"
	osexec "os/exec"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/plugin/pkg/client/auth/exec"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/kubectl/pkg/kuberc"
)

// Kuberc is kubectl's preferences file (--kuberc, $KUBERC, ~/.kube/kuberc), read for one
// thing: its credential plugin policy (credentialPluginPolicy, credentialPluginAllowlist),
// which liqoctl applies as kubectl does to every kubeconfig it loads.
type Kuberc struct {
	// Path is --kuberc ("" for $KUBERC or the default file; KUBERC=off disables it).
	Path string
}

// AddFlags registers --kuberc.
func (k *Kuberc) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&k.Path, "kuberc", "", "path to kubectl's kuberc preferences file, whose credentialPluginPolicy and credentialPluginAllowlist decide which credential plugins kubeconfigs may run (default $KUBERC or ~/.kube/kuberc; KUBERC=off disables it)")
}

// PluginPolicy reads the credential plugin policy of the kuberc file, as kubectl does: a
// missing default file means kubectl's default (every plugin may run), an unreadable one
// is an error.
func (k *Kuberc) PluginPolicy(errOut io.Writer) (clientcmdapi.PluginPolicy, error) {
	pref, err := kuberc.DefaultGetPreferences(k.Path, errOut)
	if err != nil {
		return clientcmdapi.PluginPolicy{}, fmt.Errorf("reading kubectl's preferences (kuberc): %w", err)
	}
	if pref == nil {
		return clientcmdapi.PluginPolicy{}, nil
	}
	policy := clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PolicyType(pref.CredentialPluginPolicy)}
	for _, e := range pref.CredentialPluginAllowlist {
		policy.Allowlist = append(policy.Allowlist, clientcmdapi.AllowlistEntry(e))
	}
	if err := exec.ValidatePluginPolicy(policy); err != nil {
		return clientcmdapi.PluginPolicy{}, fmt.Errorf("kuberc: %w", err)
	}
	return policy, nil
}

// ErrPluginNotAllowed means a kubeconfig would run a credential plugin that the credential
// plugin policy forbids.
var ErrPluginNotAllowed = errors.New("credential plugin not allowed")

// allowPlugin decides, before anything runs, whether policy lets command run, with the
// rules client-go applies when it is about to run it: every plugin under AllowAll (or no
// policy), none under DenyAll, and under Allowlist only a command whose path, resolved
// like the plugin's, is one of the entries'.
func allowPlugin(policy clientcmdapi.PluginPolicy, command string) error {
	switch policy.PolicyType {
	case "", clientcmdapi.PluginPolicyAllowAll:
		return nil
	case clientcmdapi.PluginPolicyDenyAll:
		return fmt.Errorf("%w: %q (kuberc credentialPluginPolicy: DenyAll)", ErrPluginNotAllowed, command)
	}
	resolved, err := osexec.LookPath(command)
	if err != nil {
		return fmt.Errorf("%w: %q cannot be found to check it against the kuberc credentialPluginAllowlist: %v", ErrPluginNotAllowed, command, err)
	}
	for _, e := range policy.Allowlist {
		if e.Command == command || e.Command == resolved {
			return nil
		}
		if p, err := osexec.LookPath(e.Command); err == nil && p == resolved {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not in the kuberc credentialPluginAllowlist", ErrPluginNotAllowed, command)
}

// CredentialSources lists, in words, what a client configuration would run or read on this
// machine to authenticate: a credential plugin, an auth provider, and local files (a token
// file is sent to the server as it is). Empty for a kubeconfig that embeds everything
// (a peering user's).
func CredentialSources(cfg *rest.Config) []string {
	var out []string
	if e := cfg.ExecProvider; e != nil {
		out = append(out, fmt.Sprintf("runs the credential plugin %s", strings.Join(append([]string{e.Command}, e.Args...), " ")))
	}
	if a := cfg.AuthProvider; a != nil {
		out = append(out, fmt.Sprintf("uses the auth provider %q, which contacts the addresses and persists the tokens its configuration names", a.Name))
	}
	if cfg.BearerTokenFile != "" {
		out = append(out, fmt.Sprintf("reads the local file %s and sends it as a bearer token to %s", cfg.BearerTokenFile, cfg.Host))
	}
	for _, f := range []struct{ what, path string }{{"client certificate", cfg.CertFile}, {"client key", cfg.KeyFile}, {"CA", cfg.CAFile}} {
		if f.path != "" {
			out = append(out, fmt.Sprintf("reads its %s from the local file %s", f.what, f.path))
		}
	}
	return out
}

// guardRemote applies to a configuration loaded from the other side's kubeconfig (a file
// its administrator may have written) the credential plugin policy, before anything runs,
// and says through warn what it will run or read on this machine. Without warn (shell
// completion, which cannot say anything), such a kubeconfig is not used at all.
func guardRemote(cfg *rest.Config, policy clientcmdapi.PluginPolicy, warn func(format string, args ...any)) error {
	sources := CredentialSources(cfg)
	if len(sources) == 0 {
		return nil
	}
	if warn == nil {
		return fmt.Errorf("the remote kubeconfig %s: not used for completion", sources[0])
	}
	if cfg.ExecProvider != nil {
		if err := allowPlugin(policy, cfg.ExecProvider.Command); err != nil {
			return fmt.Errorf("the remote kubeconfig would run a credential plugin: %w. Ask the provider's administrator for a kubeconfig with embedded credentials (liqoctl generate peering-user makes one), or allow the plugin in your kuberc", err)
		}
	}
	for _, s := range sources {
		warn("The remote kubeconfig %s: on this machine, with your rights", s)
	}
	return nil
}
