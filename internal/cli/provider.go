package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// ProviderAccess is a consumer command's optional connection to the provider: with it, the
// provider's controllers run in this process for the command when no liqo-auth-manager
// runs there, as authenticate does; without it, the provider must run its own.
type ProviderAccess struct {
	Remote      ClusterFlags
	Controllers ControllersFlags
}

// AddFlags registers the remote- connection flags and --local-controllers,
// --remote-controllers.
func (a *ProviderAccess) AddFlags(cmd *cobra.Command) {
	a.Remote.AddFlags(cmd.Flags(), "remote-", "remote (provider)")
	a.Controllers.AddFlags(cmd)
	RegisterClusterCompletions(cmd, &a.Remote, "remote-")
}

// Given reports whether the flags name the provider.
func (a *ProviderAccess) Given() bool { return a.Remote.RequireRemote() == nil }

// Validate checks the controllers flags.
func (a *ProviderAccess) Validate() error { return a.Controllers.Validate() }

// Connect connects to the provider when the flags name it (nil otherwise), refusing a
// kubeconfig that reaches another cluster than providerID or the local one, and decides on
// both sides whose controllers run there. The command then ensures the controllers of
// each side it holds (authmanager.InProcess).
func (a *ProviderAccess) Connect(ctx context.Context, g *Global, local *handshake.Side, providerID string) (*handshake.Side, error) {
	var remote *handshake.Side
	if a.Given() {
		a.Remote.policy = g.PluginPolicy
		var err error
		if remote, err = a.Remote.Side(handshake.Remote, g.Printer().Scoped(handshake.Remote)); err != nil {
			return nil, err
		}
		if err := remote.Identify(ctx); err != nil {
			return nil, err
		}
		if remote.ClusterID != providerID {
			return nil, remote.Errorf("the remote kubeconfig reaches cluster %q, not provider %q: give the provider's", remote.ClusterID, providerID)
		}
		if err := handshake.CheckDistinct(ctx, local, remote); err != nil {
			return nil, err
		}
	}
	return remote, a.Controllers.apply(ctx, local, remote)
}
