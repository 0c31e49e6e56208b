// Package install is liqoctl install: CRDs, the Liqo namespace, the cluster identity and
// the ClusterRoles, optionally the manager; or, with -o yaml, all of it printed for GitOps.
package install

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Options of liqoctl install.
type Options struct {
	Global              *cli.Global
	ClusterID           string
	APIServerURL        string
	APIServerCAFile     string
	TLSCompatibility    bool
	CertificateLifetime time.Duration
	NonceTTL            time.Duration
	WithManager         bool
	ManagerImage        string
	Output              cli.OutputFlags
	Timeout             cli.Timeout

	install cluster.InstallOptions
}

// NewCmd returns the install command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the authentication CRDs, the cluster identity and the roles on the local cluster",
		Long: `Install what a cluster needs to take part in the handshake: the authentication.liqo.io
CRDs, the Liqo namespace, the cluster ID and key pair (kept when present: they never change),
and the ClusterRoles of the tenant identities and of the manager. Idempotent.
With -o yaml, print the objects instead of applying them.`,
		Example: `  liqoctl install --cluster-id cl-provider --api-server-url https://provider.example.com:6443
  liqoctl install --with-manager --manager-image ghcr.io/liqo-auth/liqo-auth-manager:v0.1.0
  liqoctl install -o yaml > liqo-auth.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ClusterID, "cluster-id", "", "cluster ID (DNS-1123 label, at most 51 characters); random when empty")
	f.StringVar(&o.APIServerURL, "api-server-url", "", "API server URL handed to consumers (default: the one of the kubeconfig)")
	f.StringVar(&o.APIServerCAFile, "api-server-ca-file", "", "PEM CA bundle of --api-server-url (default: the one of the kubeconfig)")
	f.BoolVar(&o.TLSCompatibility, "tls-compatibility", false, "use an RSA-2048 cluster key instead of Ed25519")
	f.DurationVar(&o.CertificateLifetime, "certificate-lifetime", 0, "lifetime of the certificates issued to consumers (default 720h, at least 10m)")
	f.DurationVar(&o.NonceTTL, "nonce-ttl", 0, "how long a nonce may be used after it was created (default 15m)")
	f.BoolVar(&o.WithManager, "with-manager", false, "also deploy liqo-auth-manager")
	f.StringVar(&o.ManagerImage, "manager-image", "", "container image of liqo-auth-manager (with --with-manager)")
	o.Output.AddFlags(cmd, "")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Complete builds the install options.
func (o *Options) Complete() error {
	alg := authn.Ed25519
	if o.TLSCompatibility {
		alg = authn.RSA2048
	}
	o.install = cluster.InstallOptions{Namespace: o.Global.Local.Namespace, ClusterID: o.ClusterID, KeyAlgorithm: alg,
		Config: cluster.Config{APIServerURL: o.APIServerURL, CertificateLifetime: o.CertificateLifetime, NonceTTL: o.NonceTTL}}
	if o.APIServerCAFile != "" {
		ca, err := os.ReadFile(o.APIServerCAFile)
		if err != nil {
			return fmt.Errorf("reading --api-server-ca-file: %w", err)
		}
		o.install.Config.APIServerCA = ca
	}
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.ClusterID != "" {
		if err := cluster.ValidateClusterID(o.ClusterID); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	if o.APIServerURL != "" {
		if err := authn.ValidateServerURL(o.APIServerURL); err != nil {
			return fmt.Errorf("--api-server-url: %w", err)
		}
	}
	if len(o.install.Config.APIServerCA) > 0 {
		if _, err := authn.ParseCABundle(o.install.Config.APIServerCA); err != nil {
			return fmt.Errorf("--api-server-ca-file: %w", err)
		}
	}
	if o.CertificateLifetime != 0 && o.CertificateLifetime < authmanager.MinCertificateLifetime {
		return fmt.Errorf("--certificate-lifetime must be at least %s, the shortest the CertificateSigningRequest API accepts", authmanager.MinCertificateLifetime)
	}
	if o.WithManager != (o.ManagerImage != "") {
		return fmt.Errorf("--with-manager and --manager-image go together")
	}
	return o.Output.Validate()
}

// Run installs, or prints.
func (o *Options) Run(ctx context.Context) error {
	if o.Output.Format() != "" {
		return o.print()
	}
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p := o.Global.Printer()
	s, err := o.Global.Local.Side("local", p)
	if err != nil {
		return err
	}
	if o.install.Config.APIServerURL != "" && len(o.install.Config.APIServerCA) == 0 {
		o.install.Config.APIServerCA = s.Config.CAData
	}
	res, err := cluster.EnsureInstalled(ctx, s.Client, o.install)
	if err != nil {
		return s.Explain(err, "installing")
	}
	p.Info("CRDs, namespace %q and ClusterRoles %s, %s applied", o.install.Namespace, cluster.ControlPlaneRoleName, cluster.ManagerName)
	p.Info("Cluster ID %q (%s)", res.ClusterID, keptOrCreated(res.CreatedID))
	p.Info("Cluster key %s (%s)", res.Fingerprint, keptOrCreated(res.CreatedKey))
	if o.WithManager {
		for _, obj := range cluster.ForgeManagerObjects(o.install.Namespace, o.ManagerImage, nil) {
			if err := cluster.Apply(ctx, s.Client, obj, cluster.FieldOwner); err != nil {
				return err
			}
		}
		p.Info("liqo-auth-manager deployed with image %s", o.ManagerImage)
	}
	return nil
}

func keptOrCreated(created bool) string {
	if created {
		return "created"
	}
	return "kept: it was already installed"
}

// print writes the installation for GitOps. The key pair is not printed: private keys do
// not belong in a repository; liqo-auth-manager creates it at its first start.
func (o *Options) print() error {
	objs, err := cluster.InstallObjects(o.install)
	if err != nil {
		return err
	}
	id := o.ClusterID
	if id == "" {
		id = uuid.NewString()
	}
	objs = append(objs, &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: cluster.ClusterIDConfigMapName, Namespace: o.install.Namespace,
			Labels: map[string]string{cluster.ClusterIDLabelKey: cluster.ClusterIDLabelValue, cluster.ManagedByLabel: cluster.ManagedByValue}},
		Data: map[string]string{cluster.ClusterIDKey: id},
	})
	if o.WithManager {
		objs = append(objs, cluster.ForgeManagerObjects(o.install.Namespace, o.ManagerImage, nil)...)
	}
	o.Global.Printer().Info("The cluster key pair is not printed: liqo-auth-manager creates it at its first start (or run liqoctl install without -o)")
	return o.Output.PrintObjects(o.Global.Streams.Out, objs...)
}
