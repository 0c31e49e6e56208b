// Package authenticate is liqoctl authenticate: the consumer (local cluster) obtains an
// identity on the provider (remote cluster), with both kubeconfigs in hand.
package authenticate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl authenticate.
type Options struct {
	Global      *cli.Global
	Remote      cli.ClusterFlags
	Timeout     cli.Timeout
	ProxyURL    string
	DryRun      bool
	Controllers cli.ControllersFlags
	// RetirePeeringUser retires the peering user of the remote kubeconfig once the
	// Identity is ready: it was a single-use bootstrap credential.
	RetirePeeringUser bool

	pair *handshake.Pair
}

// NewCmd returns the authenticate command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "authenticate",
		Aliases: []string{"auth"},
		Short:   "Give the local cluster (consumer) an identity on the remote cluster (provider)",
		Long: `Run the whole Liqo authentication handshake between two clusters you can reach:
nonce on the provider, signature on the consumer, Tenant with a CSR on the provider,
certificate signed by the provider's Kubernetes CA, Identity and kubeconfig on the consumer.
Each step is printed as it happens. When a cluster runs no liqo-auth-manager, the
controllers it needs run inside liqoctl for the duration of the command; when a cluster
runs Liqo's own controllers (liqo-controller-manager), liqoctl acts as their client there.
Re-running it on an authenticated pair changes nothing.

With a peering user's kubeconfig as the remote kubeconfig (liqoctl generate peering-user),
--retire-peering-user makes it single use: once the Identity is ready, the peering user
deletes its own roles and bindings and proves, with its own certificate, that it
authorizes nothing any more.`,
		Example: `  liqoctl authenticate --kubeconfig consumer.kubeconfig --remote-kubeconfig provider.kubeconfig
  liqoctl auth --context consumer --remote-context provider --dry-run
  # a peering user as a single-use bootstrap credential
  liqoctl authenticate --kubeconfig consumer.kubeconfig --remote-kubeconfig peering-user.kubeconfig --retire-peering-user`,
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
	o.Remote.AddFlags(cmd.Flags(), "remote-", "remote (provider)")
	o.Timeout.AddFlags(cmd)
	o.Global.AddAdoptFlag(cmd)
	// Not --proxy-url: that is kubectl's flag, the proxy liqoctl reaches the local
	// cluster through, and a flag of the same name here would hide it.
	cmd.Flags().StringVar(&o.ProxyURL, "tenant-proxy-url", "", "proxy the consumer uses to reach the provider, carried by the Tenant, the Identity and the kubeconfig (http, https or socks5); --proxy-url and --remote-proxy-url are the proxies liqoctl itself uses")
	o.Controllers.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "show what would be created on each cluster and the permissions the consumer would get, changing nothing")
	cmd.Flags().BoolVar(&o.RetirePeeringUser, "retire-peering-user", false, "with a peering user's remote kubeconfig: once the Identity is ready, the peering user retires itself (deletes its own roles and bindings, proves it authorizes nothing)")
	cli.RegisterClusterCompletions(cmd, &o.Remote, "remote-")
	return cmd
}

// Complete connects to both clusters.
func (o *Options) Complete() error {
	if err := o.Remote.RequireRemote(); err != nil {
		return err
	}
	pair, err := cli.NewPair(o.Global, &o.Remote)
	if err != nil {
		return err
	}
	pair.ProxyURL, pair.Now = o.ProxyURL, o.Global.Clock
	// An administrator at a terminal waits, under --timeout, for the provider's to approve.
	pair.WaitForApproval = true
	o.pair = pair
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Controllers.Validate(); err != nil {
		return err
	}
	if o.RetirePeeringUser && o.pair.Provider.PeeringUser() == "" {
		return handshake.ScopedErrorf(handshake.Remote, "--retire-peering-user: the remote kubeconfig holds no peering user's credentials (liqoctl generate peering-user issues them)")
	}
	return authn.ValidateProxyURL(o.ProxyURL)
}

// Run performs the handshake. What does not depend on each other runs at once: both
// clusters are identified while liqoctl looks for Liqo's controllers on each; the state of
// the pair is read while the in-process controllers start (they are stopped unused when
// the pair turns out to be complete).
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	p, c := o.pair, o.pair.Consumer
	debug := o.Global.Printer().Debug
	debug("Clients ready")
	var eg errgroup.Group
	eg.Go(func() error { return p.Identify(ctx) })
	eg.Go(func() error { return o.Controllers.Apply(ctx, p) })
	if err := eg.Wait(); err != nil {
		return err
	}
	debug("Clusters identified: %s (local), %s (remote)", c.ClusterID, p.Provider.ClusterID)
	if o.DryRun {
		st, err := p.Inspect(ctx)
		if err != nil {
			return err
		}
		if o.RetirePeeringUser {
			p.Provider.Report.Info("Would retire peering user %s once the Identity is ready", p.Provider.PeeringUser())
		}
		return printPlan(ctx, o.Global, p, st)
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer func() {
		if ctrls.Stop() {
			debug("In-process controllers stopped")
		}
	}()
	st, started, err := p.InspectStarting(ctx,
		func(ctx context.Context, s *handshake.Side) (bool, error) {
			return ctrls.Start(ctx, s, authmanager.Consumer)
		},
		func(ctx context.Context, s *handshake.Side) (bool, error) {
			return ctrls.Start(ctx, s, authmanager.Provider)
		})
	if err != nil {
		return err
	}
	debug("State of the pair read")
	if st.Complete {
		c.Report.Info("Already authenticated with cluster %q: Identity %s/%s holds certificate %s, valid until %s; nothing to do",
			p.Provider.ClusterID, st.Identity.Namespace, st.Identity.Name, st.Certificate.SerialNumber.Text(16),
			st.Certificate.NotAfter.UTC().Format(time.RFC3339))
		return o.retire(ctx)
	}
	if started.Consumer {
		authmanager.ReportStarted(c, authmanager.Consumer)
	}
	if started.Provider {
		authmanager.ReportStarted(p.Provider, authmanager.Provider)
	}
	if err := p.AuthenticateWhileSyncing(ctx, st, ctrls.WaitSynced); err != nil {
		return err
	}
	return o.retire(ctx)
}

// retire retires the peering user, with --retire-peering-user, once the Identity is ready.
func (o *Options) retire(ctx context.Context) error {
	if !o.RetirePeeringUser {
		return nil
	}
	return handshake.RetirePeeringUser(ctx, o.pair.Provider)
}

// printPlan prints what authenticate would create on each cluster and the
// permissions the consumer would get, without changing anything.
func printPlan(ctx context.Context, g *cli.Global, p *handshake.Pair, st *handshake.State) error {
	c, pr := p.Consumer, p.Provider
	if st.Complete {
		c.Report.Info("Already authenticated with cluster %q: nothing would change", pr.ClusterID)
		return nil
	}
	cTN, pTN := p.PlannedNamespaces(ctx)
	if err := p.CheckPins(ctx, pTN); err != nil {
		return err
	}
	c.Report.Info("Would ensure tenant namespace %s", cTN)
	pr.Report.Info("Would ensure tenant namespace %s", pTN)
	if !st.TenantAccepted {
		pr.Report.Info("Would create Secret %s/%s with a fresh nonce", pTN, wire.NonceSecretName)
		c.Report.Info("Would create Secret %s/%s and sign the nonce with this cluster's key", cTN, wire.SignedNonceSecretName)
		pr.Report.Info("Would apply Tenant %s/%s with a CSR for user %q in group %q", pTN, c.ClusterID, c.ClusterID, wire.UserGroup)
		pr.Report.Info("Would have the CSR signed by the client signer of %s", pr.Config.Host)
	}
	pr.Report.Info("Would bind ClusterRole %s and Role %s in namespace %s", wire.ControlPlaneRoleName, wire.TenantReaderName, pTN)
	c.Report.Info("Would apply Identity %s/%s and write Secret %s/%s with the kubeconfig", cTN, wire.IdentityName(pr.ClusterID),
		cTN, wire.KubeconfigSecretName(wire.IdentityName(pr.ClusterID)))
	fmt.Fprintf(g.Streams.Out, "Permissions of user %q on cluster %q, in namespace %q only:\n", c.ClusterID, pr.ClusterID, pTN)
	fmt.Fprint(g.Streams.Out, formatRules(access.TenantRules(c.ClusterID)))
	return nil
}

// FormatRules renders RBAC rules as an indented list, one rule per line.
func formatRules(rules []rbacv1.PolicyRule) string {
	var b strings.Builder
	for _, r := range rules {
		groups := make([]string, len(r.APIGroups))
		for i, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			groups[i] = g
		}
		fmt.Fprintf(&b, "  %-45s %s", strings.Join(groups, ",")+"/"+strings.Join(r.Resources, ","), strings.Join(r.Verbs, ","))
		if len(r.ResourceNames) > 0 {
			fmt.Fprintf(&b, " (only %s)", strings.Join(r.ResourceNames, ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}
