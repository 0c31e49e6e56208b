package cli

import (
	"context"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Controllers are the in-process controllers a command started; Stop ends them.
type Controllers struct {
	mu      sync.Mutex
	runners []*authmanager.Runner
}

// Stop ends every in-process controller the command started.
func (c *Controllers) Stop() {
	for _, r := range c.runners {
		_ = r.Stop()
	}
}

// Ensure makes sure the controllers a side needs run: when a liqo-auth-manager holds
// its Lease in that cluster nothing is started; otherwise the needed controllers run in
// this process until Stop, and the side says so in one line.
func (c *Controllers) Ensure(ctx context.Context, g *Global, s *handshake.Side, role authmanager.Role) error {
	running, err := authmanager.RunningManager(ctx, s.Client, s.Namespace, g.Clock())
	if apierrors.IsForbidden(err) {
		// These credentials may not read the Lease: the controllers run here, which is
		// harmless beside a manager (both act idempotently), and said at -v.
		g.Printer().Scoped(s.Scope).Debug("cannot read the Lease of liqo-auth-manager: %v", err)
		err = nil
	}
	if err != nil {
		return s.Explain(err, "looking for a running liqo-auth-manager")
	}
	if running != nil {
		g.Printer().Scoped(s.Scope).Debug("liqo-auth-manager %s (version %s) runs in this cluster", running.Holder, running.Version)
		return nil
	}
	o := authmanager.Options{Namespace: s.Namespace, ClusterID: s.ClusterID, Role: role}
	if role.Has(authmanager.Provider) {
		url, ca, err := authmanager.ResolveAPIServer(ctx, s.Client, s.Namespace, s.Config, "", nil)
		if err == nil {
			var cfg cluster.Config
			cfg, err = cluster.GetConfig(ctx, s.Client, s.Namespace)
			o.Tenant.CertificateLifetime, o.Tenant.NonceTTL = cfg.CertificateLifetime, cfg.NonceTTL
		}
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("%sno liqo-auth-manager runs in this cluster, and these credentials may not run its provider controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can", scoped(s.Scope), err)
		}
		if err != nil {
			return err
		}
		o.Tenant.APIServer, o.Tenant.CA = url, ca
	}
	logger := logr.Discard()
	if g.Verbose > 1 {
		logger = zap.New(zap.WriteTo(g.Streams.ErrOut))
	}
	r, err := authmanager.StartInProcess(ctx, s.Config, authmanager.Connection{HTTPClient: s.HTTPClient, Mapper: s.Mapper}, o, logger)
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: no liqo-auth-manager runs in this cluster, and these credentials may not run its %s controllers (%w): ask its administrator to run liqo-auth-manager (liqoctl install --with-manager); a peering user never can",
			scoped(s.Scope)+"starting the controllers in-process", role, err)
	}
	if err != nil {
		return s.Explain(err, "starting the controllers in-process")
	}
	c.mu.Lock()
	c.runners = append(c.runners, r)
	c.mu.Unlock()
	s.Report.Info("No liqo-auth-manager runs in this cluster: its %s controllers run in-process for this command", role)
	return nil
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
