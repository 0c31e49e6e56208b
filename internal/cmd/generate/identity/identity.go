// Package identity is liqoctl generate identity: the provider prints the Identity of an
// accepted Tenant, to apply on the consumer.
package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl generate identity.
type Options struct {
	Global                *cli.Global
	RemoteClusterID       string
	RemoteTenantNamespace string
	ExpectFingerprint     string
	Output                cli.OutputFlags
	Timeout               cli.Timeout
}

// NewCmd returns the generate identity command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "identity",
		Aliases: []string{"identities"},
		Short:   "Print the Identity of an accepted Tenant, to apply on the consumer (provider)",
		Long: `On the provider, after kubectl apply of the consumer's Tenant: wait until the Tenant is
accepted and its certificate issued, then print the Identity for the consumer's
administrator to kubectl apply. The fingerprint of the CA it hands over is printed on
stderr. With --expect-fingerprint, the consumer key fingerprint its administrator gave you
must be the one the handshake accepted.`,
		Example: `  liqoctl generate identity --remote-cluster-id cl-consumer > identity.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "consumer")
	f.StringVar(&o.RemoteTenantNamespace, "remote-tenant-namespace", "", "tenant namespace of this cluster on the consumer (default liqo-tenant-<this cluster ID>)")
	f.StringVar(&o.ExpectFingerprint, "expect-fingerprint", "", "fingerprint of the consumer key (sha256:...) the Tenant must carry")
	o.Output.AddFlags(cmd, "yaml")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
		return err
	}
	if o.ExpectFingerprint != "" {
		if err := authn.ValidateFingerprint(o.ExpectFingerprint); err != nil {
			return fmt.Errorf("--expect-fingerprint: %w", err)
		}
	}
	return o.Output.Validate()
}

// Run waits for the Tenant and prints the Identity.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	tn, err := s.TenantNamespace(ctx, o.RemoteClusterID)
	if err != nil {
		return fmt.Errorf("%w: run liqoctl create nonce --remote-cluster-id %s, then apply the consumer's Tenant", err, o.RemoteClusterID)
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Provider}); ensureErr != nil {
		return ensureErr
	}
	t, err := handshake.WaitTenant(ctx, s, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: o.RemoteClusterID}}, o.Global.Clock())
	if err != nil {
		return fmt.Errorf("%w (has the consumer's Tenant been applied in namespace %s?)", err, tn)
	}
	if o.ExpectFingerprint != "" && t.Status.AcceptedKeyFingerprint != o.ExpectFingerprint {
		// An accepted Tenant holds the finalizer of the provider's controllers: a plain
		// kubectl delete waits for a manager to release it; unauthenticate runs them.
		return fmt.Errorf("the Tenant was accepted for key %s, not the expected %s: do not hand over this Identity; remove the Tenant and what it was granted with liqoctl unauthenticate --remote-cluster-id %s, then start again",
			t.Status.AcceptedKeyFingerprint, o.ExpectFingerprint, o.RemoteClusterID)
	}
	remoteTN := o.RemoteTenantNamespace
	if remoteTN == "" {
		remoteTN = wire.TenantNamespaceName(s.ClusterID)
	}
	// The consumer's choice, as its Tenant carries it: the consumer's identity controller
	// refuses any other than the one its tenant record pins.
	proxy := ptr.Deref(t.Spec.ProxyURL, "")
	id, err := handshake.ForgeIdentity(s.ClusterID, t, remoteTN, proxy)
	if err != nil {
		return err
	}
	caFP, err := authn.CAFingerprint(t.Status.AuthParams.CA)
	if err != nil {
		return err
	}
	s.Report.Info("Identity correctly generated for key %s: certificate %s valid until %s", t.Status.AcceptedKeyFingerprint,
		t.Status.Certificate.SerialNumber, t.Status.Certificate.NotAfter.UTC().Format(time.RFC3339))
	s.Report.Info("It hands over CA %s for %s", caFP, t.Status.AuthParams.APIServer)
	// Whoever may write the Tenant may have changed its proxy since the consumer's
	// administrator handed it over: said either way, for them to compare.
	s.Report.Warn("The Identity names %s for the consumer to reach this cluster (the Tenant's spec.proxyURL): check it is what the consumer's Tenant asked for; the consumer refuses an Identity with another than the one it pinned", cluster.DescribeProxy(proxy))
	// Applying the Identity is not the end: a consumer controller must turn it into the
	// kubeconfig Secret workloads use, and with none running nothing does (issue 38).
	s.Report.Info("Next, on the consumer: kubectl apply this Identity; its kubeconfig Secret is written by the consumer's liqo-auth-manager (liqoctl install --with-manager there), which must be running, else by liqoctl authenticate --remote-kubeconfig <this cluster>; liqoctl verify there checks it")
	return o.Output.PrintObjects(o.Global.Streams.Out, id)
}
