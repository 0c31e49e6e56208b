package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Controllers are the in-process controllers a command started; Stop ends them.
type Controllers struct {
	mu      sync.Mutex
	started []startedRunner
}

// startedRunner is a runner with the side and role it serves.
type startedRunner struct {
	runner *authmanager.Runner
	side   *handshake.Side
	role   authmanager.Role
}

// Stop ends every in-process controller the command started, and says whether there
// were any.
func (c *Controllers) Stop() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.started {
		_ = st.runner.Stop()
	}
	return len(c.started) > 0
}

// Ensure makes sure the controllers a side needs run: when Liqo's controllers run there
// (the side says so) or a liqo-auth-manager holds its Lease in that cluster nothing is
// started; otherwise the needed controllers run in
// this process until Stop, and the side says so in one line.
func (c *Controllers) Ensure(ctx context.Context, g *Global, s *handshake.Side, role authmanager.Role) error {
	started, err := c.Start(ctx, g, s, role)
	if err != nil || !started {
		return err
	}
	if err := c.WaitSynced(ctx); err != nil {
		return err
	}
	ReportStarted(s, role)
	return nil
}

// WaitSynced returns once every controller started so far has synced its caches, or with
// the first reason one could not, said as Start says it.
func (c *Controllers) WaitSynced(ctx context.Context) error {
	c.mu.Lock()
	started := slices.Clone(c.started)
	c.mu.Unlock()
	for _, st := range started {
		if err := st.runner.WaitSynced(ctx); err != nil {
			return startError(st.side, st.role, err)
		}
	}
	return nil
}

// startError says why the controllers of role could not start on side s.
func startError(s *handshake.Side, role authmanager.Role, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: no liqo-auth-manager runs in this cluster, and these credentials may not run its %s controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can",
			scoped(s.Scope)+"starting the controllers in-process", role, err)
	}
	return s.Explain(err, "starting the controllers in-process")
}

// ReportStarted says, on side s, that its role's controllers run in this process.
func ReportStarted(s *handshake.Side, role authmanager.Role) {
	s.Report.Info("No liqo-auth-manager runs in this cluster: its %s controllers run in-process for this command", role)
}

// Start is Ensure without the line and without the wait: it says whether it started
// controllers, which fill their caches in the background (WaitSynced), for a caller that
// reports them itself (or stops them unused).
func (c *Controllers) Start(ctx context.Context, g *Global, s *handshake.Side, role authmanager.Role) (started bool, err error) {
	if s.Liqo != "" {
		return false, nil
	}
	// Everything the controllers need is read at once, while the Lease says whether they
	// are needed at all: one round trip instead of four.
	o := authmanager.Options{Namespace: s.Namespace, ClusterID: s.ClusterID, Role: role}
	var running *authmanager.Running
	var stored cluster.Config
	var self authenticationv1.UserInfo
	var errLease, errKey, errConfig, errSelf error
	var wg sync.WaitGroup
	wg.Go(func() { running, errLease = authmanager.RunningManager(ctx, s.Client, s.Namespace, g.Clock()) })
	wg.Go(func() { o.Key, errKey = s.ClusterKey(ctx) })
	if role.Has(authmanager.Provider) {
		wg.Go(func() { stored, errConfig = cluster.GetConfig(ctx, s.Client, s.Namespace) })
		wg.Go(func() { self, errSelf = tenant.SelfReviewer(ctx, s.Client) })
	}
	wg.Wait()
	if apierrors.IsForbidden(errLease) {
		// These credentials may not read the Lease: the controllers run here, which is
		// harmless beside a manager (both act idempotently), and said at -v.
		g.Printer().Scoped(s.Scope).Debug("cannot read the Lease of liqo-auth-manager: %v", errLease)
		errLease = nil
	}
	if errLease != nil {
		return false, s.Explain(errLease, "looking for a running liqo-auth-manager")
	}
	if running != nil {
		g.Printer().Scoped(s.Scope).Debug("liqo-auth-manager %s (version %s) runs in this cluster", running.Holder, running.Version)
		return false, nil
	}
	if role.Has(authmanager.Provider) {
		err := errors.Join(errConfig, errSelf)
		if err == nil {
			o.Tenant.APIServer, o.Tenant.CA, err = authmanager.APIServerFrom(stored, s.Config, "", nil)
			o.Tenant.CertificateLifetime, o.Tenant.NonceTTL, o.Self = stored.CertificateLifetime, stored.NonceTTL, &self
		}
		if apierrors.IsForbidden(err) {
			return false, fmt.Errorf("%sno liqo-auth-manager runs in this cluster, and these credentials may not run its provider controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can", scoped(s.Scope), err)
		}
		if err != nil {
			return false, err
		}
	}
	if errKey != nil {
		return false, errKey
	}
	logger := logr.Discard()
	if g.Verbose > 1 {
		logger = zap.New(zap.WriteTo(g.Streams.ErrOut))
	}
	r, err := authmanager.StartInBackground(ctx, s.Config, authmanager.Connection{HTTPClient: s.HTTPClient, Mapper: s.Mapper}, o, logger)
	if err != nil {
		return false, startError(s, role, err)
	}
	c.mu.Lock()
	c.started = append(c.started, startedRunner{runner: r, side: s, role: role})
	c.mu.Unlock()
	return true, nil
}

// VersionSkew says, when the manager of a cluster runs another version than this liqoctl
// (mine), that they differ and what to do; "" when they agree or either is a development
// build. The manager's version is the value of its Lease label.
func VersionSkew(mine, manager string) string {
	if manager == "" || manager == "dev" || mine == "dev" || manager == authmanager.LabelValue(mine) {
		return ""
	}
	return fmt.Sprintf("liqo-auth-manager runs version %s, this liqoctl is %s: upgrade the one that is behind (liqoctl install --with-manager deploys the manager of this liqoctl's version)", manager, mine)
}

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
		where, ControllersAuto, cluster.LiqoControllerManagerName, ControllersLiqo, ControllersLiqoAuth))
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
	var eg errgroup.Group
	eg.Go(func() error { return ApplyControllers(ctx, p.Consumer, f.Local) })
	eg.Go(func() error { return ApplyControllers(ctx, p.Provider, f.Remote) })
	return eg.Wait()
}

// ApplyControllers decides whether Liqo's controllers run on side s (nil: no side), as
// mode (a value of --local-controllers or --remote-controllers) says, and says so when
// they do.
func ApplyControllers(ctx context.Context, s *handshake.Side, mode string) error {
	if s == nil {
		return nil
	}
	switch mode {
	case ControllersLiqo:
		s.Liqo = "--" + s.Scope + "-controllers=" + ControllersLiqo
		if s.Scope == "" {
			s.Liqo = "--local-controllers=" + ControllersLiqo
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
		s.Liqo = found
	}
	if s.Liqo != "" {
		s.Report.Info("Liqo's controllers run in this cluster (%s): acting as their client", s.Liqo)
	}
	return nil
}
