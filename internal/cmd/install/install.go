// Package install is liqoctl install: CRDs, the Liqo namespace, the cluster identity and
// the ClusterRoles, optionally the manager; or, with -o yaml, all of it printed for GitOps.
package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/version"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
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
	// RequireApproval is --require-approval; setApproval says it was given (without it,
	// the setting stays as it is).
	RequireApproval bool
	setApproval     bool
	// Wait, with WithManager, waits within Timeout until the manager is available.
	Wait         bool
	ManagerImage string
	TakeOver     bool
	Output       cli.OutputFlags
	Timeout      cli.Timeout

	install installer.InstallOptions
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
			o.setApproval = cmd.Flags().Changed("require-approval")
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
	f.BoolVar(&o.RequireApproval, "require-approval", false, "give a new consumer no certificate until this cluster's administrator approves it (liqoctl approve tenant); --require-approval=false turns it off; without the flag the setting is kept")
	f.BoolVar(&o.Wait, "wait", false, "with --with-manager, wait (within --timeout) until every replica of liqo-auth-manager is available, and fail if it is not, as helm install --wait does")
	f.BoolVar(&o.TakeOver, "take-over", false, "apply this project's CRDs (a superset of Liqo's schema), namespace and ClusterRoles even where another installation (Liqo's Helm chart) manages them; without it those are kept as they are")
	f.StringVar(&o.ManagerImage, "manager-image", "", "container image of liqo-auth-manager (with --with-manager; default: "+installer.ManagerImageRepository+":<this liqoctl's version>)")
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
	o.install = installer.InstallOptions{Namespace: o.Global.Local.Namespace, ClusterID: o.ClusterID, KeyAlgorithm: alg, TakeOver: o.TakeOver,
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
	if err := o.validateValues(); err != nil {
		return err
	}
	if err := o.validateManager(); err != nil {
		return err
	}
	return o.Output.Validate()
}

// validateValues checks the flags that carry a value of their own.
func (o *Options) validateValues() error {
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
	return nil
}

// validateManager checks the flags that go with --with-manager, and picks its image.
func (o *Options) validateManager() error {
	if o.Wait && !o.WithManager {
		return fmt.Errorf("--wait goes with --with-manager")
	}
	if o.ManagerImage != "" && !o.WithManager {
		return fmt.Errorf("--manager-image goes with --with-manager")
	}
	if o.WithManager && o.ManagerImage == "" {
		if o.ManagerImage = installer.DefaultManagerImage(version.Get().Version); o.ManagerImage == "" {
			return fmt.Errorf("this liqoctl is a development build (version %q) and has no released image of liqo-auth-manager: pass --manager-image (make image builds one)", version.Get().Version)
		}
	}
	return nil
}

// Run installs, or prints.
func (o *Options) Run(ctx context.Context) error {
	if o.Output.Format() != "" {
		return o.print()
	}
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p := o.Global.Printer()
	s, err := o.Global.Local.Side(handshake.Local, p)
	if err != nil {
		return err
	}
	if o.install.Config.APIServerURL != "" && len(o.install.Config.APIServerCA) == 0 {
		o.install.Config.APIServerCA = s.Config.CAData
	}
	res, err := installer.EnsureInstalled(ctx, s.Client, o.install)
	if err != nil {
		return s.Explain(err, "installing")
	}
	o.reportInstalled(res)
	if err := o.applyApproval(ctx, s); err != nil {
		return err
	}
	if o.WithManager && res.ForeignCRDs {
		return fmt.Errorf("not deploying liqo-auth-manager: another installation (Liqo) manages the authentication.liqo.io CRDs of this cluster, so its controllers handle Tenants and Identities here and a manager beside them would fight them; liqoctl acts as a client of Liqo's controllers on this cluster (or pass --take-over to make this installation the only one)")
	}
	if o.WithManager {
		for _, obj := range installer.ForgeManagerObjects(o.install.Namespace, o.ManagerImage, nil) {
			if err := cluster.Apply(ctx, s.Client, obj, wire.FieldOwner); err != nil {
				return err
			}
		}
		p.Info("liqo-auth-manager deployed with image %s", o.ManagerImage)
		return o.managerReady(ctx, s)
	}
	return nil
}

// reportInstalled says what the installation res holds, and what it kept or could not do.
func (o *Options) reportInstalled(res *installer.InstallResult) {
	p := o.Global.Printer()
	if res.PoliciesPending {
		p.Warn("The API server did not enforce the admission policies within %s: check kubectl get validatingadmissionpolicies,mutatingadmissionpolicies", "15s")
	}
	for _, u := range res.Unsupported {
		p.Warn("Not applied: this API server does not serve %s; tenant namespaces made by another tool (Liqo's liqoctl) are not recorded as made by their creator, so run liqoctl create nonce (or authenticate) for each consumer first", u)
	}
	for _, k := range res.Kept {
		p.Warn("Kept %s: another installation manages it; liqo-auth uses it as it is (--take-over replaces it)", k)
	}
	if len(res.Kept) == 0 {
		p.Info("CRDs, namespace %q and ClusterRoles %s, %s applied", o.install.Namespace, wire.ControlPlaneRoleName, wire.ManagerName)
	} else {
		p.Info("%d objects applied, %d kept", res.AppliedObjects, len(res.Kept))
	}
	p.Info("Cluster ID %q (%s)", res.ClusterID, keptOrCreated(res.CreatedID))
	p.Info("Cluster key %s (%s)", res.Fingerprint, keptOrCreated(res.CreatedKey))
}

// applyApproval records --require-approval, when given, in liqo-auth-config, under a
// field owner of its own: the other settings are kept, and an install that sets them keeps
// this one.
func (o *Options) applyApproval(ctx context.Context, s *handshake.Side) error {
	if !o.setApproval {
		return nil
	}
	if err := cluster.Apply(ctx, s.Client, cluster.ForgeApprovalConfigMap(o.install.Namespace, o.RequireApproval), wire.ApprovalFieldOwner); err != nil {
		return s.Explain(err, "recording --require-approval")
	}
	p := o.Global.Printer()
	if o.RequireApproval {
		p.Info("New consumers wait for approval (liqoctl approve tenant, deny tenant); consumers holding a certificate are kept")
	} else {
		p.Info("New consumers no longer wait for approval; keys denied stay denied (liqoctl approve tenant takes a denial back)")
	}
	return nil
}

// managerReady says whether the manager runs: without --wait, once, plainly (a Deployment
// just applied is seldom ready); with --wait, when it is, or fails at the timeout saying
// what its Pods wait for.
func (o *Options) managerReady(ctx context.Context, s *handshake.Side) error {
	p := o.Global.Printer()
	var r installer.ManagerReadiness
	check := func(ctx context.Context) (bool, error) {
		var err error
		r, err = installer.GetManagerReadiness(ctx, s.Client, o.install.Namespace)
		return r.Ready, err
	}
	rollout := fmt.Sprintf("kubectl -n %s rollout status deployment/%s", o.install.Namespace, wire.ManagerName)
	if !o.Wait {
		if ready, err := check(ctx); err != nil {
			return s.Explain(err, "reading the manager's Deployment")
		} else if !ready {
			p.Warn("liqo-auth-manager is not running yet (%s): until it is, liqoctl runs the controllers in-process for each command; %s follows it, or install --with-manager --wait waits for it", r, rollout)
			return nil
		}
		p.Info("liqo-auth-manager is running (%s)", r)
		return nil
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, check)
	switch {
	case err == nil:
		p.Info("liqo-auth-manager is running (%s)", r)
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("interrupted while waiting for liqo-auth-manager (%s): %w", r, context.Canceled)
	case ctx.Err() != nil:
		return fmt.Errorf("liqo-auth-manager is not ready after %s: %s; %s follows it", o.Timeout.Duration, r, rollout)
	}
	return s.Explain(err, "reading the manager's Deployment")
}

func keptOrCreated(created bool) string {
	if created {
		return "created"
	}
	return "kept: it was already installed"
}

// print writes the installation for GitOps (the release manifest is this, with the
// manager). Neither a cluster ID (unless --cluster-id) nor the key pair is printed: each
// cluster needs its own, and private keys do not belong in a repository.
func (o *Options) print() error {
	image := ""
	if o.WithManager {
		image = o.ManagerImage
	}
	// Printed, the setting is one more key of liqo-auth-config (off unless set).
	o.install.Config.RequireApproval = o.RequireApproval
	objs, err := installer.ManifestObjects(o.install, image)
	if err != nil {
		return err
	}
	o.Global.Printer().Info("The cluster key pair is not printed; nor is a cluster ID unless --cluster-id: liqo-auth-manager writes both at its first start (or run liqoctl install without -o)")
	return o.Output.PrintObjects(o.Global.Streams.Out, objs...)
}
