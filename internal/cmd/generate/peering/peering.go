// Package peering is liqoctl generate peering: the consumer's administrator turns the
// kubeconfig of a provider's peering user (liqoctl generate peering-user) into what a
// GitOps tool applies: the bootstrap Secret and the Peering that the consumer's
// liqo-auth-manager carries out.
package peering

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// maxSlices is the most ResourceSlices a Peering lists (the CRD's bound).
const maxSlices = 16

// Options of liqoctl generate peering.
type Options struct {
	Global *cli.Global
	// KubeconfigFile is the peering user's kubeconfig, "-" for stdin.
	KubeconfigFile string
	// Name of the Peering (default peering-<provider cluster ID>) and of its bootstrap
	// Secret (default <name>-bootstrap).
	Name, SecretName string
	// ProviderClusterID pins the provider; with Connect it must be the one the peering
	// user reaches.
	ProviderClusterID string
	// ProviderNamespace is the provider's Liqo namespace.
	ProviderNamespace string
	// Connect reads the provider's cluster ID with the peering user itself.
	Connect bool
	// Slices are the --resource-slice values.
	Slices  []string
	Output  cli.OutputFlags
	Timeout cli.Timeout

	kubeconfig []byte
	info       *authn.KubeconfigInfo
	cert       *x509.Certificate
	caPin      string
	slices     []authv1beta1.PeeringSlice
}

// NewCmd returns the generate peering command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "peering",
		Aliases: []string{"peerings"},
		Short:   "Print the Peering and its bootstrap Secret for a peering user's kubeconfig, to commit or apply (consumer)",
		Long: `On the consumer's side, with the kubeconfig of a peering user the provider's administrator
issued for this cluster (liqoctl generate peering-user --consumer-cluster-id <this cluster>):
print, as YAML documents ready to commit to Git or to kubectl apply on the consumer, the
bootstrap Secret that holds that kubeconfig (data key kubeconfig) and the Peering that
names it, both in the Liqo namespace (-n). The consumer's liqo-auth-manager then runs the
handshake with the peering user, has it retire itself once the Identity is ready, and asks
for the slices the Peering lists. This command does not connect to the consumer: -n only
names the namespace the objects are printed in. When the provider's cluster ID is known,
the Secret is labelled liqo.io/remote-cluster-id with it: the manager's cache holds only
Secrets so labelled, and such a Secret wakes the Peering at once (an unlabelled one is found
within seconds).

The kubeconfig is checked first, as the manager checks it: only embedded certificate data
(no exec plugin, auth provider, token, file, basic auth, impersonation or skipped TLS
verification), a peering user's certificate (liqo-peer-user-<consumer>-<random>), not
expired. Nothing in it runs.

Pins: spec.providerCAFingerprint is always set, to the fingerprint of the CA the kubeconfig
trusts: the manager sends nothing to a server with another CA, and checks the provider's
answer against it. spec.providerClusterID is the provider's cluster ID, read from the
provider with the peering user itself (--connect, the default: it proves the credential
works, from this machine, before it is committed; it reads the cluster ID ConfigMap by
name and writes nothing, so the credential stays unused), or given with
--provider-cluster-id (checked against the provider's with --connect, taken as is with
--connect=false, for a machine that cannot reach the provider).

The Secret holds a credential: keep it out of plain Git (sealed-secrets, SOPS, External
Secrets) or deliver it out of band. It is single use: once the Peering is peered the
peering user retires itself on the provider, and applying the Secret again does nothing.

Output: -o yaml (the default, one document per object) or json (a List), or any other
kubectl format.`,
		Example: `  liqoctl generate peering --peering-user-kubeconfig peering-user.kubeconfig > peering.yaml
  liqoctl generate peering-user --kubeconfig provider.kubeconfig --consumer-cluster-id cl-consumer \
    | liqoctl generate peering --peering-user-kubeconfig - | kubectl --kubeconfig consumer.kubeconfig apply -f -
  liqoctl generate peering --peering-user-kubeconfig pu.kubeconfig --connect=false --provider-cluster-id cl-provider
  liqoctl generate peering --peering-user-kubeconfig pu.kubeconfig --resource-slice name=slice-a,cpu=4,memory=8Gi,pods=110`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.KubeconfigFile, "peering-user-kubeconfig", "", "the peering user's kubeconfig, from liqoctl generate peering-user on the provider (- for stdin)")
	_ = cmd.MarkFlagRequired("peering-user-kubeconfig")
	_ = cmd.MarkFlagFilename("peering-user-kubeconfig")
	f.StringVar(&o.Name, "name", "", "name of the Peering (default peering-<provider cluster ID>)")
	f.StringVar(&o.SecretName, "secret-name", "", "name of the bootstrap Secret (default <Peering name>-bootstrap)")
	f.StringVar(&o.ProviderClusterID, "provider-cluster-id", "", "cluster ID of the provider, pinned in spec.providerClusterID (with --connect, it must be the one the peering user reaches)")
	f.StringVar(&o.ProviderNamespace, "provider-namespace", "", "Liqo namespace of the provider, spec.providerNamespace (default "+wire.DefaultLiqoNamespace+")")
	_ = cmd.RegisterFlagCompletionFunc("provider-cluster-id", cli.RemoteClusterIDCompletion(g))
	for _, name := range []string{"name", "secret-name", "provider-namespace", "resource-slice"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	f.BoolVar(&o.Connect, "connect", true, "read the provider's cluster ID with the peering user itself: proves the credential works before it is committed (read only; the credential stays unused)")
	f.StringArrayVar(&o.Slices, "resource-slice", nil, "a ResourceSlice to ask for once peered, repeatable: name=NAME[,class=CLASS][,cpu=Q][,memory=Q][,pods=N]")
	o.Output.AddFlags(cmd, "yaml")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.KubeconfigFile == "" {
		return errors.New("--peering-user-kubeconfig is required: the file liqoctl generate peering-user printed on the provider, or - to read it from stdin")
	}
	if o.ProviderClusterID != "" {
		if err := cli.ValidateClusterIDFlag("--provider-cluster-id", o.ProviderClusterID); err != nil {
			return err
		}
	}
	if !o.Connect && o.ProviderClusterID == "" && o.Name == "" {
		return errors.New("--connect=false needs --provider-cluster-id (pinned, and naming the Peering) or at least --name: without connecting, liqoctl cannot know the provider")
	}
	if o.ProviderNamespace != "" {
		if errs := validation.IsDNS1123Label(o.ProviderNamespace); len(errs) > 0 {
			return fmt.Errorf("--provider-namespace %q is not a namespace name: %s", o.ProviderNamespace, errs[0])
		}
	}
	for flag, name := range map[string]string{"--name": o.Name, "--secret-name": o.SecretName} {
		if name == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("%s %q is not an object name: %s", flag, name, errs[0])
		}
	}
	slices, err := parseSlices(o.Slices)
	if err != nil {
		return err
	}
	o.slices = slices
	return o.Output.Validate()
}

// Complete reads the peering user's kubeconfig and checks it as the consumer's manager
// will: embedded certificate data only, a peering user, not expired, a CA to pin.
func (o *Options) Complete() error {
	data, err := o.readKubeconfig()
	if err != nil {
		return err
	}
	info, cert, err := checkPeeringUser(data, o.Global.Clock())
	if err != nil {
		return fmt.Errorf("%s: %w", o.source(), err)
	}
	if consumer := wire.PeeringUserConsumer(cert.Subject.CommonName); consumer == o.ProviderClusterID {
		return fmt.Errorf("--provider-cluster-id %q is the cluster this peering user was issued for, the consumer: give the provider's", o.ProviderClusterID)
	}
	caPin, err := authn.CAFingerprint(info.CA)
	if err != nil {
		return fmt.Errorf("%s: its CA (certificate-authority-data) cannot be pinned: %w; a peering user's kubeconfig embeds the provider's CA: ask the provider's administrator for a new one", o.source(), err)
	}
	o.kubeconfig, o.info, o.cert, o.caPin = data, info, cert, caPin
	return nil
}

// source names the kubeconfig in messages.
func (o *Options) source() string {
	if o.KubeconfigFile == "-" {
		return "the kubeconfig read from stdin"
	}
	return fmt.Sprintf("kubeconfig %q", o.KubeconfigFile)
}

// readKubeconfig reads the file, or stdin for "-", bounded.
func (o *Options) readKubeconfig() ([]byte, error) {
	var r io.Reader
	if o.KubeconfigFile == "-" {
		r = o.Global.Streams.In
	} else {
		f, err := os.Open(o.KubeconfigFile)
		if err != nil {
			return nil, fmt.Errorf("--peering-user-kubeconfig: %w: give the file liqoctl generate peering-user printed on the provider", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	// authn.ReadKubeconfig refuses anything larger than 4 certificates' worth.
	data, err := io.ReadAll(io.LimitReader(r, 4*authn.MaxCertificateSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", o.source(), err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("%s is empty: give the output of liqoctl generate peering-user on the provider", o.source())
	}
	return data, nil
}

// checkPeeringUser parses a peering user's kubeconfig strictly and returns what it holds
// and its certificate; an error says what is wrong and what to do.
func checkPeeringUser(data []byte, now time.Time) (*authn.KubeconfigInfo, *x509.Certificate, error) {
	info, err := authn.ReadKubeconfig(data)
	if err != nil {
		if authn.ReasonOf(err) == authn.ReasonKubeconfigForeignCredentials {
			return nil, nil, fmt.Errorf("%w: a Peering's bootstrap credential is a peering user's kubeconfig as liqoctl generate peering-user prints it, with the certificate and key embedded and nothing that runs or reads anything on the consumer", err)
		}
		return nil, nil, fmt.Errorf("%w: give the kubeconfig liqoctl generate peering-user printed on the provider", err)
	}
	cert, err := authn.ParseCertificate(info.CertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("the kubeconfig's client certificate: %w: give the kubeconfig liqoctl generate peering-user printed on the provider", err)
	}
	user := cert.Subject.CommonName
	if !strings.HasPrefix(user, wire.PeeringUserPrefix) {
		return nil, nil, fmt.Errorf("the kubeconfig authenticates as %q, not as a peering user (%s<consumer>-<random>): a Peering takes only a single-use peering user, never an administrator's credential; ask the provider's administrator for one (liqoctl generate peering-user --consumer-cluster-id <this cluster's ID>)", user, wire.PeeringUserPrefix)
	}
	if !now.Before(cert.NotAfter) {
		return nil, nil, fmt.Errorf("peering user %s expired at %s: ask the provider's administrator for a new one (liqoctl generate peering-user --consumer-cluster-id %s)",
			user, cert.NotAfter.UTC().Format(time.RFC3339), wire.PeeringUserConsumer(user))
	}
	return info, cert, nil
}

// parseSlices parses --resource-slice values: name=NAME[,class=CLASS][,cpu=Q][,memory=Q][,pods=N].
func parseSlices(values []string) ([]authv1beta1.PeeringSlice, error) {
	if len(values) > maxSlices {
		return nil, fmt.Errorf("--resource-slice: %d slices, a Peering lists at most %d", len(values), maxSlices)
	}
	var out []authv1beta1.PeeringSlice
	seen := map[string]bool{}
	for _, v := range values {
		s, err := parseSlice(v)
		if err != nil {
			return nil, fmt.Errorf("--resource-slice %q: %w (expected name=NAME[,class=CLASS][,cpu=4][,memory=8Gi][,pods=110])", v, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("--resource-slice: slice %q is given twice: one entry per slice", s.Name)
		}
		seen[s.Name] = true
		out = append(out, s)
	}
	return out, nil
}

// parseSlice parses one --resource-slice value.
func parseSlice(v string) (authv1beta1.PeeringSlice, error) {
	s := authv1beta1.PeeringSlice{}
	given := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" {
			return s, fmt.Errorf("%q is not key=value", kv)
		}
		if given[key] {
			return s, fmt.Errorf("%s is given twice", key)
		}
		given[key] = true
		switch key {
		case "name":
			if err := wire.ValidateSliceName(val); err != nil {
				return s, err
			}
			s.Name = val
		case "class":
			if errs := validation.IsDNS1123Label(val); len(errs) > 0 {
				return s, fmt.Errorf("class %q is not valid: %s", val, errs[0])
			}
			s.Class = authv1beta1.ResourceSliceClass(val)
		case string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourcePods):
			q, err := resource.ParseQuantity(val)
			if err != nil || q.Sign() <= 0 {
				return s, fmt.Errorf("%s %q is not a positive quantity (examples: 4, 500m, 8Gi)", key, val)
			}
			if s.Resources == nil {
				s.Resources = corev1.ResourceList{}
			}
			s.Resources[corev1.ResourceName(key)] = q
		default:
			return s, fmt.Errorf("unknown key %q: name, class, cpu, memory or pods", key)
		}
	}
	if s.Name == "" {
		return s, errors.New("no name=")
	}
	return s, nil
}

// Run reads the provider's cluster ID with the peering user (--connect), then prints the
// Secret and the Peering.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p := o.Global.Printer()
	user := o.cert.Subject.CommonName
	p.Info("Peering user %s, issued for consumer cluster %q, valid until %s: apply what follows on that cluster before then",
		user, wire.PeeringUserConsumer(user), o.cert.NotAfter.UTC().Format(time.RFC3339))
	providerID, err := o.providerID(ctx)
	if err != nil {
		return err
	}
	p.Info("spec.providerCAFingerprint pins %s, the CA of %s that the kubeconfig trusts", o.caPin, o.info.Server)
	if providerID == "" {
		p.Warn("No spec.providerClusterID: only the CA pin says which provider this is (--provider-cluster-id, or --connect, pins it)")
	}
	name := o.Name
	if name == "" {
		name = "peering-" + providerID
	}
	secretName := o.SecretName
	if secretName == "" {
		secretName = name + "-bootstrap"
	}
	for flag, n := range map[string]string{"the Peering's name": name, "the Secret's name": secretName} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("%s %q is not an object name: %s: choose one with --name or --secret-name", flag, n, errs[0])
		}
	}
	s, pe := o.forge(name, secretName, providerID)
	p.Warn("Secret %s/%s holds a credential: keep it out of plain Git (sealed-secrets, SOPS, External Secrets) or deliver it out of band. It is single use: once Peering %s is peered, the peering user retires itself and the Secret may be deleted",
		s.Namespace, s.Name, pe.Name)
	return o.Output.PrintObjects(o.Global.Streams.Out, s, pe)
}

// providerID is the provider's cluster ID to pin: read with the peering user (--connect),
// checked against --provider-cluster-id, or that flag as is ("" when neither).
func (o *Options) providerID(ctx context.Context) (string, error) {
	if !o.Connect {
		return o.ProviderClusterID, nil
	}
	r := o.Global.Printer().Scoped(handshake.Remote)
	pr, err := authmanager.DialKubeconfig(o.info, r)
	if err != nil {
		return "", handshake.ScopedErrorf(handshake.Remote, "%w", err)
	}
	pr.Namespace = o.providerNamespace()
	if err := pr.Identify(ctx); err != nil {
		if handshake.Unreachable(err) {
			return "", fmt.Errorf("%w (where this machine cannot reach %s, generate without connecting: --connect=false --provider-cluster-id <the provider's ID>)", err, o.info.Server)
		}
		return "", err
	}
	if o.ProviderClusterID != "" && pr.ClusterID != o.ProviderClusterID {
		return "", pr.Errorf("the peering user reaches cluster %q, not --provider-cluster-id %q: check which provider it comes from", pr.ClusterID, o.ProviderClusterID)
	}
	r.Info("Connected as %s: cluster %q, pinned in spec.providerClusterID", o.cert.Subject.CommonName, pr.ClusterID)
	return pr.ClusterID, nil
}

// providerNamespace is the provider's Liqo namespace.
func (o *Options) providerNamespace() string {
	if o.ProviderNamespace == "" {
		return wire.DefaultLiqoNamespace
	}
	return o.ProviderNamespace
}

// forge returns the bootstrap Secret and the Peering, in the Liqo namespace. The Secret
// carries liqo.io/remote-cluster-id when the provider is known: the manager's cache holds
// only Secrets so labelled, and one it holds wakes the Peering at once.
func (o *Options) forge(name, secretName, providerID string) (*corev1.Secret, *authv1beta1.Peering) {
	ns := o.Global.Local.Namespace
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{wire.KubeconfigField: o.kubeconfig},
	}
	if providerID != "" {
		s.Labels = map[string]string{wire.RemoteClusterIDLabel: providerID}
	}
	pe := &authv1beta1.Peering{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: authv1beta1.PeeringSpec{
			BootstrapSecretRef:    corev1.LocalObjectReference{Name: secretName},
			ProviderClusterID:     authv1beta1.ClusterID(providerID),
			ProviderCAFingerprint: o.caPin,
			ProviderNamespace:     o.ProviderNamespace,
			ResourceSlices:        o.slices,
		},
	}
	return s, pe
}
