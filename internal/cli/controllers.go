package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Values of --local-controllers and --remote-controllers.
const (
	ControllersAuto     = "auto"
	ControllersLiqo     = "liqo"
	ControllersLiqoAuth = "liqo-auth"
)

// ControllersFlags say whose controllers handle the handshake on each cluster: Liqo's own
// (liqoctl then acts as their client) or this project's (liqo-auth-manager, or in-process).
type ControllersFlags struct {
	Local, Remote string
}

// AddFlags registers --local-controllers and --remote-controllers.
func (f *ControllersFlags) AddFlags(cmd *cobra.Command) {
	f.addFlag(cmd, "local", &f.Local)
	f.addFlag(cmd, "remote", &f.Remote)
}

// AddLocalFlag registers --local-controllers alone, for a command on one cluster.
func (f *ControllersFlags) AddLocalFlag(cmd *cobra.Command) {
	f.Remote = ControllersAuto
	f.addFlag(cmd, "local", &f.Local)
}

func (f *ControllersFlags) addFlag(cmd *cobra.Command, where string, v *string) {
	name := where + "-controllers"
	cmd.Flags().StringVar(v, name, ControllersAuto, fmt.Sprintf("whose controllers handle the protocol on the %s cluster: %s (Liqo's when its %s Deployment runs there), %s (liqoctl acts as a client of Liqo's controllers), %s (liqo-auth-manager, or in-process)",
		where, ControllersAuto, wire.LiqoControllerManagerName, ControllersLiqo, ControllersLiqoAuth))
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions([]string{ControllersAuto, ControllersLiqo, ControllersLiqoAuth}, cobra.ShellCompDirectiveNoFileComp))
}

// Validate checks the values.
func (f *ControllersFlags) Validate() error {
	for name, v := range map[string]string{"--local-controllers": f.Local, "--remote-controllers": f.Remote} {
		switch v {
		case ControllersAuto, ControllersLiqo, ControllersLiqoAuth:
		default:
			return fmt.Errorf("%s must be %s, %s or %s, not %q", name, ControllersAuto, ControllersLiqo, ControllersLiqoAuth, v)
		}
	}
	return nil
}

// Apply decides, for both sides of the pair, whether Liqo's controllers run there, and
// says so on each side that runs them.
func (f *ControllersFlags) Apply(ctx context.Context, p *handshake.Pair) error {
	return f.apply(ctx, p.Consumer, p.Provider)
}

// apply decides, at once, whose controllers run on local and remote (either may be nil).
func (f *ControllersFlags) apply(ctx context.Context, local, remote *handshake.Side) error {
	var eg errgroup.Group
	eg.Go(func() error { return ApplyControllers(ctx, local, f.Local) })
	eg.Go(func() error { return ApplyControllers(ctx, remote, f.Remote) })
	return eg.Wait()
}

// ApplyControllers decides whether Liqo's controllers run on side s (nil: no side), as
// mode (a value of --local-controllers or --remote-controllers) says, and says so when
// they do.
func ApplyControllers(ctx context.Context, s *handshake.Side, mode string) error {
	if s == nil {
		return nil
	}
	var evidence string
	switch mode {
	case ControllersLiqo:
		evidence = "--" + s.Scope + "-controllers=" + ControllersLiqo
		if s.Scope == "" {
			evidence = "--local-controllers=" + ControllersLiqo
		}
	case ControllersAuto:
		found, err := cluster.DetectLiqo(ctx, s.Client, s.Namespace)
		if apierrors.IsForbidden(err) {
			// These credentials may not look: this project's controllers are assumed,
			// and the flag says otherwise.
			return nil
		}
		if err != nil {
			return s.Explain(err, "looking for Liqo's controllers")
		}
		evidence = found
	}
	if evidence != "" {
		s.SetControllers(handshake.LiqoControllers{Evidence: evidence})
		s.Report.Info("Liqo's controllers run in this cluster (%s): acting as their client", evidence)
	}
	return nil
}
