package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// DefaultTimeout bounds every command that waits.
const DefaultTimeout = 2 * time.Minute

// Global are the options every command gets: streams, the local cluster and verbosity.
type Global struct {
	Streams genericiooptions.IOStreams
	Local   ClusterFlags
	Verbose int
	// Kuberc is kubectl's preferences file: its credential plugin policy applies to every
	// kubeconfig liqoctl loads.
	Kuberc Kuberc
	// Now is the clock of the commands (time.Now when nil).
	Now func() time.Time
	// AdoptTenantNamespace is --adopt-tenant-namespace, for the commands that make tenant
	// namespaces.
	AdoptTenantNamespace bool
	// printer is created on first use, after flags are parsed.
	printer *Printer
	// policy is the credential plugin policy, read once.
	policyOnce sync.Once
	policy     clientcmdapi.PluginPolicy
	policyErr  error
}

// AddFlags registers the global flags.
func (g *Global) AddFlags(cmd *cobra.Command) {
	g.Local.AddFlags(cmd.PersistentFlags(), "", "local")
	g.Local.policy = g.PluginPolicy
	g.Kuberc.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().CountVarP(&g.Verbose, "verbose", "v", "more output (repeat for more)")
}

// PluginPolicy is the credential plugin policy of kubectl's kuberc, read once per command.
func (g *Global) PluginPolicy() (clientcmdapi.PluginPolicy, error) {
	g.policyOnce.Do(func() { g.policy, g.policyErr = g.Kuberc.PluginPolicy(g.Streams.ErrOut) })
	return g.policy, g.policyErr
}

// AddAdoptFlag registers --adopt-tenant-namespace on a command that makes tenant namespaces.
func (g *Global) AddAdoptFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&g.AdoptTenantNamespace, "adopt-tenant-namespace", false,
		"adopt an existing liqo-tenant-<id> namespace this cluster has no record of (made by an older liqo-auth or by Liqo): only if you know who made it")
}

// Printer returns the progress printer (stderr).
func (g *Global) Printer() *Printer {
	if g.printer == nil {
		g.printer = NewPrinter(g.Streams.ErrOut, g.Verbose)
	}
	return g.printer
}

// Clock returns the current time.
func (g *Global) Clock() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// ControllerLogger is the logger of the controllers a command runs in-process: silent
// unless -vv.
func (g *Global) ControllerLogger() logr.Logger {
	if g.Verbose > 1 {
		return zap.New(zap.WriteTo(g.Streams.ErrOut))
	}
	return logr.Discard()
}

// Debugf prints a line at -v on the side named by scope ("" for none).
func (g *Global) Debugf(scope, format string, args ...any) {
	g.Printer().Scoped(scope).Debug(format, args...)
}

// LocalSide connects to the local cluster and reads its ID.
func (g *Global) LocalSide(ctx context.Context, scope string) (*handshake.Side, error) {
	s, err := g.Local.Side(scope, g.Printer().Scoped(scope))
	if err != nil {
		return nil, err
	}
	s.AdoptTenantNamespace = g.AdoptTenantNamespace
	return s, s.Identify(ctx)
}

// Timeout is the --timeout flag of commands that wait.
type Timeout struct {
	Duration time.Duration
}

// AddFlags registers --timeout.
func (t *Timeout) AddFlags(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&t.Duration, "timeout", DefaultTimeout, "how long to wait for the other side before giving up")
}

// Context returns a context bounded by the timeout.
func (t *Timeout) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, t.Duration)
}

// LocalTenantNamespace connects to the local cluster, refuses its own ID as the remote
// one, and ensures the tenant namespace of remoteID. role names the remote cluster in
// messages ("consumer" or "provider").
func (g *Global) LocalTenantNamespace(ctx context.Context, remoteID, role string) (*handshake.Side, string, error) {
	s, err := g.LocalSide(ctx, "")
	if err != nil {
		return nil, "", err
	}
	if s.ClusterID == remoteID {
		return nil, "", fmt.Errorf("--remote-cluster-id %q is this cluster's own ID: give the %s's", remoteID, role)
	}
	tn, err := s.EnsureTenantNamespace(ctx, remoteID)
	if err != nil {
		return nil, "", err
	}
	s.Report.Info("Tenant namespace %s ensured", tn)
	return s, tn, nil
}
