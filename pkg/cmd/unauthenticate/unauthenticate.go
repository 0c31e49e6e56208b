// Package unauthenticate is liqoctl unauthenticate: it removes everything the handshake
// created on both clusters and proves that the consumer's identity lost its access.
package unauthenticate

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl unauthenticate.
type Options struct {
	Global           *cli.Global
	Remote           cli.ClusterFlags
	Timeout          cli.Timeout
	DeleteNamespaces bool
	Controllers      cli.ControllersFlags

	pair *handshake.Pair
}

// NewCmd returns the unauthenticate command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "unauthenticate",
		Aliases: []string{"unauth"},
		Short:   "Undo liqoctl authenticate and prove the consumer lost its access",
		Long: `Remove the Identity, its kubeconfig and the signed nonce from the local cluster (consumer),
and the Tenant, its bindings, the nonce and any certificate request from the remote cluster
(provider). Kubernetes cannot revoke a client certificate, so liqoctl then asks the provider,
with SubjectAccessReviews, about every permission the tenant role granted: it succeeds only
when every one is denied. Missing objects are fine: the command can be re-run.`,
		Example: `  liqoctl unauthenticate --kubeconfig consumer.kubeconfig --remote-kubeconfig provider.kubeconfig
  liqoctl unauth --context consumer --remote-context provider --delete-namespaces`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Remote.AddFlags(cmd.Flags(), "remote-", "remote (provider)")
	o.Timeout.AddFlags(cmd)
	o.Controllers.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.DeleteNamespaces, "delete-namespaces", false, "also delete the tenant namespaces on both clusters")
	cli.RegisterClusterCompletions(cmd, &o.Remote, "remote-")
	return cmd
}

// Complete connects to both clusters.
func (o *Options) Complete() (err error) {
	if err := o.Remote.RequireRemote(); err != nil {
		return err
	}
	if err := o.Controllers.Validate(); err != nil {
		return err
	}
	o.pair, err = cli.NewPair(o.Global, &o.Remote)
	return err
}

// Run tears the handshake down and verifies the revocation.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	if err := cli.IdentifyPair(ctx, o.pair); err != nil {
		return err
	}
	if err := o.Controllers.Apply(ctx, o.pair); err != nil {
		return err
	}
	st, err := o.pair.Inspect(ctx)
	if err != nil {
		return err
	}
	var ctrls cli.Controllers
	defer ctrls.Stop()
	if st.Tenant != nil {
		// The Tenant's finalizer is handled by the provider's controllers.
		if err := ctrls.Ensure(ctx, o.Global, o.pair.Provider, authmanager.Provider); err != nil {
			return err
		}
	}
	return o.pair.Unauthenticate(ctx, o.DeleteNamespaces)
}
