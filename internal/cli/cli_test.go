package cli

import (
	"bytes"
	"errors"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

func TestPrinterPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := NewPrinter(&b, 0)
	p.Scoped("local").Info("Tenant namespace correctly ensured")
	p.Scoped("remote").Warn("careful %d", 1)
	p.Info("unscoped")
	p.Debug("hidden without -v")
	p.Error(errors.New("boom"))
	assert.Equal(t, "INFO (local) Tenant namespace correctly ensured\nWARN (remote) careful 1\nINFO unscoped\nERROR boom\n", b.String())

	b.Reset()
	v := NewPrinter(&b, 1)
	v.Scoped("remote").Info("step")
	assert.Regexp(t, `^INFO \(remote\) \[ *\d+\.\d{3}s\] step\n$`, b.String(), "-v adds the elapsed time")
}

// outputFlags returns -o set to format, as a command line would.
func outputFlags(t *testing.T, def, format string) *OutputFlags {
	t.Helper()
	o := &OutputFlags{}
	cmd := &cobra.Command{Use: "x"}
	o.AddFlags(cmd, def)
	if format != "" {
		require.NoError(t, cmd.Flags().Set("output", format))
	}
	return o
}

func TestPrintObjects(t *testing.T) {
	tn := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Spec: authv1beta1.TenantSpec{ClusterID: "a"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	print := func(format string, objs ...client.Object) string {
		var b bytes.Buffer
		require.NoError(t, outputFlags(t, "", format).PrintObjects(&b, objs...))
		return b.String()
	}
	out := print("yaml", tn, cm)
	assert.Contains(t, out, "apiVersion: authentication.liqo.io/v1beta1\nkind: Tenant\n")
	assert.Contains(t, out, "---\napiVersion: v1\nkind: ConfigMap\n")
	assert.NotContains(t, out, "creationTimestamp")
	assert.NotContains(t, out, "status")
	assert.NotContains(t, out, "managedFields", "as kubectl: without --show-managed-fields")

	out = print("json", tn)
	assert.True(t, strings.HasPrefix(out, "{\n    \""), "kubectl's JSON style: 4 spaces")
	assert.Contains(t, out, `"kind": "Tenant"`)
	assert.Contains(t, print("json", tn, cm), `"kind": "List"`)
	assert.Equal(t, "tenant.authentication.liqo.io/a\nconfigmap/b\n", print("name", tn, cm))
	assert.Equal(t, "a", print("jsonpath={.spec.clusterID}", tn))
	assert.Equal(t, "a/ns", print("go-template={{.metadata.name}}/{{.metadata.namespace}}", tn))

	for f, ok := range map[string]bool{"": true, "yaml": true, "json": true, "name": true, "jsonpath={.a}": true, "xml": false, "go-template={{": false} {
		assert.Equal(t, ok, outputFlags(t, "", f).Validate() == nil, f)
	}
	assert.Equal(t, "yaml", outputFlags(t, "yaml", "").Format(), "the default applies")
}

func TestPrintData(t *testing.T) {
	data := map[string]any{"clusterID": "cl-a", "tenants": []any{}}
	for format, want := range map[string]string{
		"yaml":                  "clusterID: cl-a\ntenants: []\n",
		"json":                  "{\n    \"clusterID\": \"cl-a\",\n    \"tenants\": []\n}\n",
		"jsonpath={.clusterID}": "cl-a",
	} {
		var b bytes.Buffer
		require.NoError(t, outputFlags(t, "", format).PrintData(&b, data), format)
		assert.Equal(t, want, b.String(), format)
	}
	assert.Error(t, outputFlags(t, "", "name").PrintData(&bytes.Buffer{}, data))
}

func TestRequireRemote(t *testing.T) {
	parse := func(args ...string) *ClusterFlags {
		var f ClusterFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.AddFlags(fs, "remote-", "remote")
		require.NoError(t, fs.Parse(args))
		return &f
	}
	assert.Error(t, (&ClusterFlags{}).RequireRemote())
	assert.Error(t, parse().RequireRemote())
	assert.Error(t, parse("--remote-token", "x").RequireRemote(), "a token names no cluster")
	assert.NoError(t, parse("--remote-kubeconfig", "k").RequireRemote())
	assert.NoError(t, parse("--remote-context", "c").RequireRemote())
	assert.NoError(t, parse("--remote-server", "https://p").RequireRemote())
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	(&ClusterFlags{}).AddFlags(fs, "remote-", "remote")
	for _, name := range []string{"remote-kubeconfig", "remote-context", "remote-as", "remote-token", "remote-namespace", "remote-request-timeout"} {
		assert.NotNil(t, fs.Lookup(name), name)
	}
	for _, name := range []string{"remote-username", "remote-password", "remote-cache-dir", "kubeconfig"} {
		assert.Nil(t, fs.Lookup(name), name)
	}
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain words, tabs\tand\nnewlines", "plain words, tabs\tand\nnewlines"},
		{"red \x1b[31malert\x1b[0m", `red \x1b[31malert\x1b[0m`},
		{"title \x1b]0;pwned\x07", `title \x1b]0;pwned\a`},
		{"carriage\rreturn", `carriage\rreturn`},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"unicode é ok", "unicode é ok"},
		{"bad \xff byte", `bad \ufffd byte`},
	} {
		assert.Equal(t, tc.want, Sanitize(tc.in), "%q", tc.in)
	}
}

func TestAllowPlugin(t *testing.T) {
	sh, err := osexec.LookPath("sh")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		policy clientcmdapi.PluginPolicy
		ok     bool
	}{
		{"no policy", clientcmdapi.PluginPolicy{}, true},
		{"AllowAll", clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowAll}, true},
		{"DenyAll", clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}, false},
		{"listed by name", clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist, Allowlist: []clientcmdapi.AllowlistEntry{{Command: "sh"}}}, true},
		{"listed by path", clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist, Allowlist: []clientcmdapi.AllowlistEntry{{Command: sh}}}, true},
		{"not listed", clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist, Allowlist: []clientcmdapi.AllowlistEntry{{Command: "true"}}}, false},
	} {
		err := allowPlugin(tc.policy, "sh")
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, ErrPluginNotAllowed, tc.name)
		}
	}
}

func TestCredentialSources(t *testing.T) {
	assert.Empty(t, CredentialSources(&rest.Config{Host: "https://p", TLSClientConfig: rest.TLSClientConfig{CertData: []byte("c"), KeyData: []byte("k"), CAData: []byte("ca")}}),
		"an embedded kubeconfig runs and reads nothing")
	got := CredentialSources(&rest.Config{Host: "https://p", BearerTokenFile: "/home/me/token", ExecProvider: &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token"}},
		TLSClientConfig: rest.TLSClientConfig{CAFile: "/etc/ca.crt"}})
	assert.Equal(t, []string{"runs the credential plugin aws eks get-token", "reads the local file /home/me/token and sends it as a bearer token to https://p",
		"reads its CA from the local file /etc/ca.crt"}, got)
	assert.Error(t, guardRemote(&rest.Config{ExecProvider: &clientcmdapi.ExecConfig{Command: "aws"}}, clientcmdapi.PluginPolicy{}, nil), "completion never runs a remote plugin")
}

// TestDataOutputHasNoName: a command that prints a report neither advertises -o name nor
// accepts it, and still takes kubectl's other formats.
func TestDataOutputHasNoName(t *testing.T) {
	var o OutputFlags
	cmd := &cobra.Command{Use: "report"}
	o.AddDataFlags(cmd, "")
	if usage := cmd.Flag("output").Usage; strings.Contains(usage, "name") {
		t.Fatalf("-o advertises name: %s", usage)
	}
	for format, ok := range map[string]bool{"name": false, "yaml": true, "json": true, "jsonpath={.a}": true} {
		require.NoError(t, cmd.Flags().Set("output", format))
		err := o.Validate()
		if ok != (err == nil) {
			t.Errorf("-o %s: %v", format, err)
		}
	}
}
