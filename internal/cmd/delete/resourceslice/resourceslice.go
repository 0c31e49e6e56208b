// Package resourceslice is liqoctl delete resourceslice: the consumer gives a slice back.
package resourceslice

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl delete resourceslice.
type Options struct {
	Global          *cli.Global
	Name            string
	RemoteClusterID string
	Timeout         cli.Timeout
	Provider        cli.ProviderAccess
}

// NewCmd returns the delete resourceslice command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "resourceslice NAME",
		Aliases: []string{"resourceslices", "rslice"},
		Short:   "Give a slice back: remove it on both clusters and prove its identity lost its access (consumer)",
		Long: `On the consumer: delete the ResourceSlice, wait until its copy on the provider is gone
(the provider then removes the slice identity's Role, RoleBinding and certificate requests)
and its Identity and kubeconfig with it, then prove, with the slice identity's own
certificate, that it may no longer do anything it was granted. Kubernetes cannot revoke the
certificate itself: it authorizes nothing, and expires. The consumer's controllers run in
liqoctl when no liqo-auth-manager runs here; the provider's too when the provider is named
(--remote-kubeconfig, ...) and runs none.`,
		Example:           `  liqoctl delete resourceslice slice-a --remote-cluster-id cl-provider`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cli.SliceNameCompletion(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
				return fmt.Errorf("the slice name %q is not valid: %s", o.Name, errs[0])
			}
			if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
				return err
			}
			if err := o.Provider.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "provider")
	o.Timeout.AddFlags(cmd)
	o.Provider.AddFlags(cmd)
	return cmd
}

// Run deletes the slice and proves the revocation.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, handshake.Local)
	if err != nil {
		return err
	}
	if checkKnownPeerErr := handshake.CheckKnownPeer(ctx, s, o.RemoteClusterID, "--remote-cluster-id"); checkKnownPeerErr != nil {
		return checkKnownPeerErr
	}
	ns, err := s.TenantNamespace(ctx, o.RemoteClusterID)
	if err != nil {
		return s.Errorf("no tenant namespace for provider %q (%w)", o.RemoteClusterID, err)
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	remote, err := o.Provider.Connect(ctx, o.Global, s, o.RemoteClusterID)
	if err != nil {
		return err
	}
	if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Consumer}, authmanager.SideRole{Side: remote, Role: authmanager.Provider}); err != nil {
		return err
	}
	return handshake.DeleteSlices(ctx, s, ns, o.RemoteClusterID, o.Name)
}
