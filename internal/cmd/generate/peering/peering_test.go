package peering

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/clientcmd/api/latest"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// pki is a provider CA and the kubeconfigs of users it issued.
type pki struct {
	ca *testenv.CA
	fp string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := testenv.NewCA("provider")
	require.NoError(t, err)
	fp, err := authn.CAFingerprint(ca.CertPEM)
	require.NoError(t, err)
	return &pki{ca: ca, fp: fp}
}

// kubeconfig is a kubeconfig of user cn on server, changed by mutate.
func (p *pki) kubeconfig(t *testing.T, cn, server string, mutate func(*api.Cluster, *api.AuthInfo)) []byte {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(cn, []string{"liqo.io"}, nil, nil)
	require.NoError(t, err)
	cfg := api.NewConfig()
	c := &api.Cluster{Server: server, CertificateAuthorityData: p.ca.CertPEM}
	u := &api.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	if mutate != nil {
		mutate(c, u)
	}
	cfg.Clusters["cl-provider"], cfg.AuthInfos[cn] = c, u
	cfg.Contexts["cl-provider"] = &api.Context{Cluster: "cl-provider", AuthInfo: cn, Namespace: "liqo-tenant-cl-consumer"}
	cfg.CurrentContext = "cl-provider"
	data, err := runtime.Encode(latest.Codec, cfg)
	require.NoError(t, err)
	return data
}

// run runs liqoctl generate peering with args, stdin and the clock now; the global flags
// (-n) are the root's.
func run(t *testing.T, args []string, stdin []byte, now time.Time) (stdout, stderr string, err error) {
	t.Helper()
	in, out, errOut := bytes.NewReader(stdin), &bytes.Buffer{}, &bytes.Buffer{}
	g := &cli.Global{Streams: genericiooptions.IOStreams{In: in, Out: out, ErrOut: errOut}, Now: func() time.Time { return now }}
	root := &cobra.Command{Use: "liqoctl", SilenceUsage: true, SilenceErrors: true}
	g.AddFlags(root)
	root.AddCommand(NewCmd(g))
	root.SetArgs(append([]string{"peering"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// printed decodes the printed YAML documents (or JSON List) into the Secret and the Peering.
func printed(t *testing.T, out string) (*corev1.Secret, *authv1beta1.Peering) {
	t.Helper()
	var s *corev1.Secret
	var p *authv1beta1.Peering
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		docs := []any{m}
		if m["kind"] == "List" {
			docs = m["items"].([]any)
		}
		for _, d := range docs {
			obj := d.(map[string]any)
			switch obj["kind"] {
			case "Secret":
				s = &corev1.Secret{}
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, s))
			case "Peering":
				assert.Equal(t, authv1beta1.GroupVersion.String(), obj["apiVersion"])
				p = &authv1beta1.Peering{}
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, p))
			default:
				t.Fatalf("unexpected object %v", obj["kind"])
			}
		}
	}
	require.NotNil(t, s, "a Secret is printed:\n%s", out)
	require.NotNil(t, p, "a Peering is printed:\n%s", out)
	return s, p
}

// credentialWarning starts the one warning about the Secret.
const credentialWarning = "holds a credential: keep it out of plain Git"

// TestGeneratePeering: what is printed for a good peering user's kubeconfig, and an error
// that says what to do for every bad input. --connect=false except where connecting is
// what is tested (no cluster here; the integration test connects).
func TestGeneratePeering(t *testing.T) {
	k := newPKI(t)
	now := time.Now()
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	const server = "https://provider.example:6443"
	good := k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "0a1b2c3d"), server, nil)
	goodFile := file("good", good)
	offline := []string{"--peering-user-kubeconfig", goodFile, "--connect=false", "--provider-cluster-id", "cl-provider"}

	type check func(t *testing.T, s *corev1.Secret, p *authv1beta1.Peering, stderr string)
	cases := []struct {
		name  string
		args  []string
		stdin []byte
		now   time.Time
		// wantErr is a part of the error, "" when it succeeds.
		wantErr []string
		check   check
	}{
		{name: "offline, with the provider's ID", args: offline, check: func(t *testing.T, s *corev1.Secret, p *authv1beta1.Peering, stderr string) {
			assert.Equal(t, "peering-cl-provider", p.Name)
			assert.Equal(t, "peering-cl-provider-bootstrap", s.Name)
			assert.Equal(t, wire.DefaultLiqoNamespace, p.Namespace)
			assert.Equal(t, wire.DefaultLiqoNamespace, s.Namespace)
			assert.Equal(t, good, s.Data[wire.KubeconfigField], "the kubeconfig, byte for byte")
			assert.Equal(t, map[string]string{wire.RemoteClusterIDLabel: "cl-provider"}, s.Labels, "labelled for the manager's cache")
			assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
			assert.Equal(t, s.Name, p.Spec.BootstrapSecretRef.Name)
			assert.Equal(t, authv1beta1.ClusterID("cl-provider"), p.Spec.ProviderClusterID)
			assert.Equal(t, k.fp, p.Spec.ProviderCAFingerprint, "the CA is always pinned")
			assert.Empty(t, p.Spec.ProviderNamespace)
			assert.Empty(t, p.Spec.ResourceSlices)
			assert.Equal(t, 1, strings.Count(stderr, credentialWarning), "warned once:\n%s", stderr)
			assert.Contains(t, stderr, "single use")
			assert.Contains(t, stderr, k.fp)
			assert.Contains(t, stderr, `consumer cluster "cl-consumer"`)
			assert.NotContains(t, stderr, "No spec.providerClusterID", "the provider is pinned")
		}},
		{name: "from stdin, names and namespaces given", stdin: good,
			args: []string{"--peering-user-kubeconfig", "-", "--connect=false", "--provider-cluster-id", "cl-provider", "--name", "to-provider", "--secret-name", "to-provider-kubeconfig", "-n", "liqo-system", "--provider-namespace", "liqo-auth"},
			check: func(t *testing.T, s *corev1.Secret, p *authv1beta1.Peering, _ string) {
				assert.Equal(t, "to-provider", p.Name)
				assert.Equal(t, "to-provider-kubeconfig", s.Name)
				assert.Equal(t, "to-provider-kubeconfig", p.Spec.BootstrapSecretRef.Name)
				assert.Equal(t, "liqo-system", p.Namespace)
				assert.Equal(t, "liqo-system", s.Namespace)
				assert.Equal(t, "liqo-auth", p.Spec.ProviderNamespace)
				assert.Equal(t, good, s.Data[wire.KubeconfigField])
			}},
		{name: "offline, no provider ID: named, CA pinned only, warned", args: []string{"--peering-user-kubeconfig", goodFile, "--connect=false", "--name", "p"},
			check: func(t *testing.T, s *corev1.Secret, p *authv1beta1.Peering, stderr string) {
				assert.Equal(t, "p-bootstrap", s.Name)
				assert.Empty(t, p.Spec.ProviderClusterID)
				assert.Empty(t, s.Labels)
				assert.Equal(t, k.fp, p.Spec.ProviderCAFingerprint)
				assert.Contains(t, stderr, "No spec.providerClusterID")
			}},
		{name: "slices", args: append(append([]string{}, offline...), "--resource-slice", "name=slice-a,cpu=4,memory=8Gi,pods=110", "--resource-slice", "name=slice-b,class=gpu"),
			check: func(t *testing.T, _ *corev1.Secret, p *authv1beta1.Peering, _ string) {
				require.Len(t, p.Spec.ResourceSlices, 2)
				a, b := p.Spec.ResourceSlices[0], p.Spec.ResourceSlices[1]
				assert.Equal(t, "slice-a", a.Name)
				assert.True(t, a.Resources.Cpu().Equal(resource.MustParse("4")))
				assert.True(t, a.Resources.Memory().Equal(resource.MustParse("8Gi")))
				assert.True(t, a.Resources.Pods().Equal(resource.MustParse("110")))
				assert.Equal(t, authv1beta1.PeeringSlice{Name: "slice-b", Class: "gpu"}, b)
			}},
		{name: "-o json is a List", args: append(append([]string{}, offline...), "-o", "json"), check: func(t *testing.T, _ *corev1.Secret, p *authv1beta1.Peering, _ string) {
			assert.Equal(t, "peering-cl-provider", p.Name)
		}},

		{name: "no kubeconfig flag", args: []string{"--connect=false", "--provider-cluster-id", "cl-provider"}, wantErr: []string{"peering-user-kubeconfig"}},
		{name: "missing file", args: []string{"--peering-user-kubeconfig", filepath.Join(dir, "nope"), "--connect=false", "--provider-cluster-id", "cl-provider"},
			wantErr: []string{"no such file", "liqoctl generate peering-user"}},
		{name: "empty stdin", args: []string{"--peering-user-kubeconfig", "-", "--connect=false", "--provider-cluster-id", "cl-provider"},
			wantErr: []string{"stdin is empty", "liqoctl generate peering-user"}},
		{name: "not a kubeconfig", args: []string{"--peering-user-kubeconfig", file("junk", []byte("hello: [world")), "--connect=false", "--provider-cluster-id", "cl-provider"},
			wantErr: []string{"cannot be parsed", "liqoctl generate peering-user"}},
		{name: "an exec plugin", args: []string{"--peering-user-kubeconfig", file("exec", k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "1"), server, func(_ *api.Cluster, u *api.AuthInfo) {
			u.Exec = &api.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: api.NeverExecInteractiveMode}
		})), "--connect=false", "--provider-cluster-id", "cl-provider"}, wantErr: []string{"exec credential plugin", "nothing that runs or reads"}},
		{name: "a token", args: []string{"--peering-user-kubeconfig", file("token", k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "1"), server, func(_ *api.Cluster, u *api.AuthInfo) {
			u.Token = "secret"
		})), "--connect=false", "--provider-cluster-id", "cl-provider"}, wantErr: []string{"a token", "nothing that runs or reads"}},
		{name: "a CA file", args: []string{"--peering-user-kubeconfig", file("cafile", k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "1"), server, func(c *api.Cluster, _ *api.AuthInfo) {
			c.CertificateAuthority = "/etc/passwd"
		})), "--connect=false", "--provider-cluster-id", "cl-provider"}, wantErr: []string{"a CA file"}},
		{name: "no embedded CA", args: []string{"--peering-user-kubeconfig", file("noca", k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "1"), server, func(c *api.Cluster, _ *api.AuthInfo) {
			c.CertificateAuthorityData = nil
		})), "--connect=false", "--provider-cluster-id", "cl-provider"}, wantErr: []string{"cannot be pinned", "new one"}},
		{name: "an administrator's certificate", args: []string{"--peering-user-kubeconfig", file("admin", k.kubeconfig(t, "kubernetes-admin", server, nil)), "--connect=false", "--provider-cluster-id", "cl-provider"},
			wantErr: []string{`"kubernetes-admin", not as a peering user`, "liqoctl generate peering-user --consumer-cluster-id"}},
		{name: "expired", args: offline, now: now.Add(400 * 24 * time.Hour), wantErr: []string{"expired at", "liqoctl generate peering-user --consumer-cluster-id cl-consumer"}},
		{name: "offline without provider or name", args: []string{"--peering-user-kubeconfig", goodFile, "--connect=false"}, wantErr: []string{"--connect=false needs --provider-cluster-id"}},
		{name: "the consumer's ID as the provider's", args: []string{"--peering-user-kubeconfig", goodFile, "--connect=false", "--provider-cluster-id", "cl-consumer"},
			wantErr: []string{"issued for, the consumer"}},
		{name: "bad provider ID", args: []string{"--peering-user-kubeconfig", goodFile, "--provider-cluster-id", "Not_An_ID"}, wantErr: []string{"--provider-cluster-id"}},
		{name: "bad name", args: append(append([]string{}, offline...), "--name", "Peering!"), wantErr: []string{"--name", "not an object name"}},
		{name: "bad provider namespace", args: append(append([]string{}, offline...), "--provider-namespace", "a.b"), wantErr: []string{"--provider-namespace"}},
		{name: "slice without name", args: append(append([]string{}, offline...), "--resource-slice", "cpu=4"), wantErr: []string{"no name="}},
		{name: "slice twice", args: append(append([]string{}, offline...), "--resource-slice", "name=a", "--resource-slice", "name=a"), wantErr: []string{"given twice"}},
		{name: "slice negative", args: append(append([]string{}, offline...), "--resource-slice", "name=a,cpu=-1"), wantErr: []string{"not a positive quantity"}},
		{name: "slice unknown key", args: append(append([]string{}, offline...), "--resource-slice", "name=a,gpu=1"), wantErr: []string{`unknown key "gpu"`}},
		{name: "bad output", args: append(append([]string{}, offline...), "-o", "xml"), wantErr: []string{"--output"}},
		{name: "connecting to a provider that is not there", args: []string{"--peering-user-kubeconfig", file("unreachable", k.kubeconfig(t, wire.PeeringUserName("cl-consumer", "1"), "https://127.0.0.1:1", nil)), "--timeout", "20s"},
			wantErr: []string{"(remote)", "cannot reach", "--connect=false --provider-cluster-id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.now
			if at.IsZero() {
				at = now
			}
			stdout, stderr, err := run(t, tc.args, tc.stdin, at)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				assert.Empty(t, stdout, "nothing printed on an error")
				assert.NotContains(t, stderr, credentialWarning)
				return
			}
			require.NoError(t, err, stderr)
			assert.NotContains(t, stdout, "WARN", "progress goes to stderr")
			s, p := printed(t, stdout)
			tc.check(t, s, p, stderr)
		})
	}
}
