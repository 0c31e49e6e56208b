// Package authenticate is liqoctl authenticate: the consumer (local cluster) obtains an
// identity on the provider (remote cluster), with both kubeconfigs in hand.
package authenticate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cli"
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
Re-running it on an authenticated pair changes nothing.`,
		Example: `  liqoctl authenticate --kubeconfig consumer.kubeconfig --remote-kubeconfig provider.kubeconfig
  liqoctl auth --context consumer --remote-context provider --dry-run`,
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
	cmd.Flags().StringVar(&o.ProxyURL, "proxy-url", "", "proxy the consumer uses to reach the provider (http, https or socks5)")
	o.Controllers.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "show what would be created on each cluster and the permissions the consumer would get, changing nothing")
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
	o.pair = pair
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := o.Controllers.Validate(); err != nil {
		return err
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
	eg.Go(func() error { return cli.IdentifyPair(ctx, p) })
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
		return cli.PrintAuthenticatePlan(ctx, o.Global, p, st)
	}
	var ctrls cli.Controllers
	defer func() {
		if ctrls.Stop() {
			debug("In-process controllers stopped")
		}
	}()
	var st *handshake.State
	var started [2]bool
	var errProvider error
	eg.Go(func() (err error) { st, err = p.Inspect(ctx); return err })
	eg.Go(func() (err error) { started[0], err = ctrls.Start(ctx, o.Global, c, authmanager.Consumer); return err })
	var wg sync.WaitGroup
	wg.Go(func() { started[1], errProvider = ctrls.Start(ctx, o.Global, p.Provider, authmanager.Provider) })
	err := eg.Wait()
	wg.Wait()
	if err != nil {
		return err
	}
	// The provider's controllers are needed only while the Tenant is not accepted with a
	// valid certificate: a pair that got that far completes without them (a peering user
	// whose provider stopped its manager).
	if errProvider != nil && !st.TenantAccepted {
		return errProvider
	}
	debug("State of the pair read")
	if st.Complete {
		c.Report.Info("Already authenticated with cluster %q: Identity %s/%s holds certificate %s, valid until %s; nothing to do",
			p.Provider.ClusterID, st.Identity.Namespace, st.Identity.Name, st.Certificate.SerialNumber.Text(16),
			st.Certificate.NotAfter.UTC().Format(time.RFC3339))
		return nil
	}
	if started[0] {
		cli.ReportStarted(c, authmanager.Consumer)
	}
	if started[1] {
		cli.ReportStarted(p.Provider, authmanager.Provider)
	}
	// The handshake's first steps need no controller: the controllers fill their caches
	// meanwhile. Should they fail to, the handshake is stopped with their reason.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var syncErr error
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		if syncErr = ctrls.WaitSynced(ctx); syncErr != nil {
			stop()
		}
	}()
	_, err = p.Authenticate(ctx, st)
	if err != nil {
		stop()
		if <-synced; syncErr != nil && !errors.Is(syncErr, context.Canceled) {
			return syncErr
		}
	}
	return err
}
