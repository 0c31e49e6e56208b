package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
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

// Ensure makes sure the controllers a slice command needs run: the consumer's on local
// (in-process when no manager runs there), and, when the flags name the provider
// providerID, the provider's too. It returns the provider's side (nil when not named).
// A kubeconfig naming another cluster than providerID, or the local one, is refused.
func (a *ProviderAccess) Ensure(ctx context.Context, g *Global, local *handshake.Side, providerID string, ctrls *Controllers) (*handshake.Side, error) {
	var remote *handshake.Side
	if a.Given() {
		a.Remote.policy = g.PluginPolicy
		var err error
		if remote, err = a.Remote.Side("remote", g.Printer().Scoped("remote")); err != nil {
			return nil, err
		}
		if err := remote.Identify(ctx); err != nil {
			return nil, err
		}
		if remote.ClusterID != providerID {
			return nil, fmt.Errorf("(remote) the remote kubeconfig reaches cluster %q, not provider %q: give the provider's", remote.ClusterID, providerID)
		}
		if err := handshake.CheckDistinct(ctx, local, remote); err != nil {
			return nil, err
		}
	}
	var eg errgroup.Group
	eg.Go(func() error { return ApplyControllers(ctx, local, a.Controllers.Local) })
	eg.Go(func() error { return ApplyControllers(ctx, remote, a.Controllers.Remote) })
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	sides := []struct {
		s    *handshake.Side
		role authmanager.Role
	}{{local, authmanager.Consumer}, {remote, authmanager.Provider}}
	started := make([]bool, len(sides))
	eg = errgroup.Group{}
	for i, sd := range sides {
		if sd.s == nil {
			continue
		}
		eg.Go(func() (err error) { started[i], err = ctrls.Start(ctx, g, sd.s, sd.role); return err })
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if err := ctrls.WaitSynced(ctx); err != nil {
		return nil, err
	}
	for i, sd := range sides {
		if started[i] {
			ReportStarted(sd.s, sd.role)
		}
	}
	return remote, nil
}
