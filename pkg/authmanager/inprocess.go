package authmanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Host is what a command gives the controllers it runs in its own process: its clock,
// the logger of the controllers, and its debug lines (-v) on a side.
type Host interface {
	Clock() time.Time
	ControllerLogger() logr.Logger
	Debugf(scope, format string, args ...any)
}

// InProcess are the controllers a command runs in its own process, for its own duration,
// on the sides where no liqo-auth-manager runs; Stop ends them.
type InProcess struct {
	// LiveKeys makes the controllers read the authentication-keys Secret at each use
	// instead of the key read at their start: for the command that rotates the key, whose
	// controllers must follow the staged, switched and retired keys.
	LiveKeys bool

	host    Host
	mu      sync.Mutex
	started []startedRunner
}

// NewInProcess returns the in-process controllers of a command run by host.
func NewInProcess(host Host) *InProcess { return &InProcess{host: host} }

// startedRunner is a runner with the side and role it serves.
type startedRunner struct {
	runner *Runner
	side   *handshake.Side
	role   Role
}

// SideRole is a side and the role its controllers play for a command.
type SideRole struct {
	Side *handshake.Side
	Role Role
}

// Stop ends every in-process controller the command started, and says whether there
// were any.
func (c *InProcess) Stop() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.started {
		_ = st.runner.Stop()
	}
	return len(c.started) > 0
}

// Ensure makes sure the controllers each side needs run, at once on every side (nil sides
// are skipped): when Liqo's controllers run there (the side says so) or a liqo-auth-manager
// holds its Lease in that cluster nothing is started; otherwise the needed controllers run
// in this process until Stop, and each such side says so in one line once they are ready.
func (c *InProcess) Ensure(ctx context.Context, sides ...SideRole) error {
	started := make([]bool, len(sides))
	var eg errgroup.Group
	for i, sd := range sides {
		if sd.Side == nil {
			continue
		}
		eg.Go(func() (err error) { started[i], err = c.Start(ctx, sd.Side, sd.Role); return err })
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	if err := c.WaitSynced(ctx); err != nil {
		return err
	}
	for i, sd := range sides {
		if started[i] {
			ReportStarted(sd.Side, sd.Role)
		}
	}
	return nil
}

// WaitSynced returns once every controller started so far has synced its caches, or with
// the first reason one could not, said as Start says it.
func (c *InProcess) WaitSynced(ctx context.Context) error {
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
func startError(s *handshake.Side, role Role, err error) error {
	if apierrors.IsForbidden(err) {
		return s.Errorf("starting the controllers in-process: no liqo-auth-manager runs in this cluster, and these credentials may not run its %s controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can",
			role, err)
	}
	return s.Explain(err, "starting the controllers in-process")
}

// ReportStarted says, on side s, that its role's controllers run in this process.
func ReportStarted(s *handshake.Side, role Role) {
	s.Report.Info("No liqo-auth-manager runs in this cluster: its %s controllers run in-process for this command", role)
}

// Start is Ensure of one side without the line and without the wait: it says whether it
// started controllers, which fill their caches in the background (WaitSynced), for a
// caller that reports them itself (or stops them unused).
func (c *InProcess) Start(ctx context.Context, s *handshake.Side, role Role) (started bool, err error) {
	if s.Controllers().Liqo() {
		return false, nil
	}
	rd := c.readForStart(ctx, s, role)
	if apierrors.IsForbidden(rd.errLease) {
		// These credentials may not read the Lease: the controllers run here, which is
		// harmless beside a manager (both act idempotently), and said at -v.
		c.host.Debugf(s.Scope, "cannot read the Lease of liqo-auth-manager: %v", rd.errLease)
		rd.errLease = nil
	}
	if rd.errLease != nil {
		return false, s.Explain(rd.errLease, "looking for a running liqo-auth-manager")
	}
	if rd.running != nil {
		c.host.Debugf(s.Scope, "liqo-auth-manager %s (version %s) runs in this cluster", rd.running.Holder, rd.running.Version)
		s.ManagerRunning = role.Has(Provider)
		return false, nil
	}
	o := Options{Namespace: s.Namespace, ClusterID: s.ClusterID, Role: role}
	if role.Has(Provider) {
		if optionsErr := rd.providerOptions(s, &o); optionsErr != nil {
			return false, optionsErr
		}
	}
	if rd.errKey != nil {
		return false, rd.errKey
	}
	// One command's controllers verify and seal with the key it read (a rotation is driven
	// by a manager, or by liqoctl rotate key, not beside a command).
	o.Key, o.Keys = rd.keys.Current, cluster.FixedKeys{Current: rd.keys.Current}
	if c.LiveKeys {
		o.Keys = cluster.SecretKeys{Reader: s.Client, Namespace: s.Namespace}
	}
	r, err := Start(ctx, s.Config, Connection{HTTPClient: s.HTTPClient, Mapper: s.Mapper}, o, c.host.ControllerLogger())
	if err != nil {
		return false, startError(s, role, err)
	}
	c.mu.Lock()
	c.started = append(c.started, startedRunner{runner: r, side: s, role: role})
	c.mu.Unlock()
	return true, nil
}

// startReads is what Start reads of a side before it decides: whether a manager runs (the
// Lease), and what its role's controllers need.
type startReads struct {
	running                              *Running
	keys                                 cluster.KeySet
	stored                               cluster.Config
	self                                 authenticationv1.UserInfo
	errLease, errKey, errConfig, errSelf error
}

// readForStart reads what Start decides on. The cluster key (which a consumer's handshake
// reads anyway) is read while the Lease says whether the controllers are needed at all;
// what only a provider's controllers need (its key, its configuration, who these
// credentials are) is read once the Lease says no manager runs: where one does, the
// provider's API server is asked nothing for them.
func (c *InProcess) readForStart(ctx context.Context, s *handshake.Side, role Role) *startReads {
	rd := &startReads{}
	var wg sync.WaitGroup
	readKeys := func() { rd.keys, rd.errKey = s.ClusterKeys(ctx) }
	wg.Go(func() { rd.running, rd.errLease = RunningManager(ctx, s.Client, s.Namespace, c.host.Clock()) })
	if role.Has(Consumer) {
		wg.Go(readKeys)
	}
	wg.Wait()
	if !role.Has(Provider) || rd.running != nil || (rd.errLease != nil && !apierrors.IsForbidden(rd.errLease)) {
		return rd
	}
	if !role.Has(Consumer) {
		wg.Go(readKeys)
	}
	wg.Go(func() { rd.stored, rd.errConfig = cluster.GetConfig(ctx, s.Client, s.Namespace) })
	wg.Go(func() { rd.self, rd.errSelf = selfReviewer(ctx, s.Client) })
	wg.Wait()
	return rd
}

// providerOptions completes o, a provider's, with what rd read, or says why these
// credentials cannot run its controllers.
func (rd *startReads) providerOptions(s *handshake.Side, o *Options) error {
	err := errors.Join(rd.errConfig, rd.errSelf)
	if err == nil {
		o.Tenant.APIServer, o.Tenant.CA, err = APIServerFrom(rd.stored, s.Config, "", nil)
		o.Tenant.CertificateLifetime, o.Tenant.NonceTTL, o.Self = rd.stored.CertificateLifetime, rd.stored.NonceTTL, &rd.self
	}
	if apierrors.IsForbidden(err) {
		return s.Errorf("no liqo-auth-manager runs in this cluster, and these credentials may not run its provider controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can", err)
	}
	return err
}

// VersionSkew says, when the manager of a cluster runs another version than this liqoctl
// (mine), that they differ and what to do; "" when they agree or either is a development
// build. The manager's version is the value of its Lease label.
func VersionSkew(mine, manager string) string {
	if manager == "" || manager == "dev" || mine == "dev" || manager == LabelValue(mine) {
		return ""
	}
	return fmt.Sprintf("liqo-auth-manager runs version %s, this liqoctl is %s: upgrade the one that is behind (liqoctl install --with-manager deploys the manager of this liqoctl's version)", manager, mine)
}
