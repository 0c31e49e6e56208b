// Package unauthenticate is liqoctl unauthenticate: it removes everything the handshake
// created on both clusters and proves that the consumer's identity lost its access.
package unauthenticate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl unauthenticate.
type Options struct {
	Global               *cli.Global
	Remote               cli.ClusterFlags
	Timeout              cli.Timeout
	DeleteNamespaces     bool
	DeleteResourceSlices bool
	Controllers          cli.ControllersFlags
	// RemoteClusterID, without a remote kubeconfig, cleans this cluster only, for a
	// peer that cannot be reached.
	RemoteClusterID string
	// Leave, with RemoteClusterID on a consumer, leaves that provider with this cluster's
	// own identity there: its Tenant deleted and the revocation proven from here.
	Leave bool

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
when every one is denied. Missing objects are fine: the command can be re-run.

When the other cluster is gone or cannot be reached, --remote-cluster-id without a remote
kubeconfig cleans this cluster only, in whichever role it plays for that peer: as its
consumer, its Identity, kubeconfig and signed nonce (and, with --delete-resourceslices, the
slices asked of it); as its provider, the peer's Tenant, bindings, nonce, requests and
slices, with the proof that the peer's user lost its access here. It then says what stays
on the other cluster and the command its administrator runs there.

With --leave, --remote-cluster-id on a consumer leaves that provider with the only
credential this cluster holds there, its own identity (no kubeconfig of the provider): it
deletes its ResourceSlices of that provider (with --delete-resourceslices), deletes its own
Tenant there, waits until the provider removed it, proves with its own certificate that
none of its access remains, then removes its Identity, kubeconfig and signed nonce. A
provider that does not let a consumer delete its Tenant (Liqo's controllers) is said so,
with the command its administrator runs.`,
		Example: `  liqoctl unauthenticate --kubeconfig consumer.kubeconfig --remote-kubeconfig provider.kubeconfig
  liqoctl unauth --context consumer --remote-context provider --delete-namespaces
  # the provider is gone: clean the consumer only
  liqoctl unauthenticate --kubeconfig consumer.kubeconfig --remote-cluster-id cl-provider
  # the consumer leaves the provider by itself, with its own identity there
  liqoctl unauthenticate --kubeconfig consumer.kubeconfig --remote-cluster-id cl-provider --leave`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Remote.RequireRemote() != nil && o.RemoteClusterID != "" {
				if err := o.Validate(); err != nil {
					return err
				}
				if o.Leave {
					return o.RunLeave(cmd.Context())
				}
				return o.RunLocal(cmd.Context())
			}
			if o.Leave {
				return errors.New("--leave goes with --remote-cluster-id ID (the provider to leave) and without a remote kubeconfig: the consumer leaves with its own identity there")
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Remote.AddFlags(cmd.Flags(), "remote-", "remote (provider)")
	o.Timeout.AddFlags(cmd)
	o.Controllers.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.DeleteResourceSlices, "delete-resourceslices", false, "first delete the ResourceSlices this cluster holds from the provider (each with its proof of revocation); without it, unauthenticate refuses while there are any")
	cmd.Flags().BoolVar(&o.DeleteNamespaces, "delete-namespaces", false, "also delete the tenant namespaces on both clusters")
	cmd.Flags().StringVar(&o.RemoteClusterID, "remote-cluster-id", "", "without a remote kubeconfig: clean this cluster only, for this peer, which cannot be reached")
	cmd.Flags().BoolVar(&o.Leave, "leave", false, "with --remote-cluster-id, on a consumer: leave that provider with this cluster's own identity there (deletes its Tenant there and proves the revocation), then clean this cluster")
	_ = cmd.RegisterFlagCompletionFunc("remote-cluster-id", cli.RemoteClusterIDCompletion(g))
	cli.RegisterClusterCompletions(cmd, &o.Remote, "remote-")
	return cmd
}

// Complete connects to both clusters.
func (o *Options) Complete() (err error) {
	if requireRemoteErr := o.Remote.RequireRemote(); requireRemoteErr != nil {
		return fmt.Errorf("%w; or, when it is gone, --remote-cluster-id ID to clean this cluster only", requireRemoteErr)
	}
	if o.RemoteClusterID != "" {
		return errors.New("--remote-cluster-id cleans this cluster only: it goes without --remote-kubeconfig, --remote-context and --remote-server")
	}
	if validateErr := o.Controllers.Validate(); validateErr != nil {
		return validateErr
	}
	o.pair, err = cli.NewPair(o.Global, &o.Remote)
	return err
}

// Validate checks the flags of the local-only mode.
func (o *Options) Validate() error {
	if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
		return err
	}
	if o.Leave && o.DeleteNamespaces {
		return errors.New("--leave removes this cluster's Identity only: run liqoctl unauthenticate --remote-cluster-id ID --delete-namespaces afterwards to delete the tenant namespace")
	}
	return o.Controllers.Validate()
}

// localSide is this cluster, for the one-cluster forms (--remote-cluster-id): not the peer
// itself, with its controllers chosen.
func (o *Options) localSide(ctx context.Context) (*handshake.Side, error) {
	local, err := o.Global.LocalSide(ctx, handshake.Local)
	if err != nil {
		return nil, err
	}
	if local.ClusterID == o.RemoteClusterID {
		return nil, fmt.Errorf("--remote-cluster-id %q is this cluster's own ID", o.RemoteClusterID)
	}
	if err := cli.ApplyControllers(ctx, local, o.Controllers.Local); err != nil {
		return nil, err
	}
	return local, nil
}

// RunLeave is --leave: the consumer leaves provider RemoteClusterID with its own identity
// there, its slices first (with --delete-resourceslices), run by its consumer controllers.
func (o *Options) RunLeave(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	local, err := o.localSide(ctx)
	if err != nil {
		return err
	}
	slices, err := handshake.SlicesFor(ctx, local, o.RemoteClusterID)
	if err != nil && !meta.IsNoMatchError(err) {
		return local.Explain(err, "listing the ResourceSlices asked of the provider")
	}
	if len(slices) > 0 {
		names := make([]string, 0, len(slices))
		for _, rs := range slices {
			names = append(names, rs.Name)
		}
		if !o.DeleteResourceSlices {
			return local.Errorf("this cluster holds ResourceSlices from provider %q: %s; leaving deletes them first: pass --delete-resourceslices", o.RemoteClusterID, strings.Join(names, ", "))
		}
		// Each slice's copy on the provider is removed by this cluster's consumer controllers.
		ctrls := authmanager.NewInProcess(o.Global)
		defer ctrls.Stop()
		if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: local, Role: authmanager.Consumer}); err != nil {
			return err
		}
	}
	return handshake.Leave(ctx, local, o.RemoteClusterID, o.Global.Clock())
}

// Run tears the handshake down and verifies the revocation.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	if err := o.identify(ctx); err != nil {
		return err
	}
	if err := o.Controllers.Apply(ctx, o.pair); err != nil {
		return err
	}
	st, err := o.pair.Inspect(ctx)
	if err != nil {
		return err
	}
	c, pr := o.pair.Consumer, o.pair.Provider
	slices, names, err := o.slicesToDelete(ctx)
	if err != nil {
		return err
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if st.Tenant != nil || len(names) > 0 {
		// The Tenant's finalizer and the slices' copies are handled by the provider's
		// controllers.
		if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: pr, Role: authmanager.Provider}); err != nil {
			return err
		}
	}
	var slicesErr error
	if len(names) > 0 {
		if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: c, Role: authmanager.Consumer}); err != nil {
			return err
		}
		// A slice deleted whose proof failed is said at the end: the control plane's
		// access is revoked all the same.
		if slicesErr = handshake.DeleteSlicesWithProvider(ctx, c, pr, slices[0].Namespace, names...); slicesErr != nil && !handshake.OnlyProofsFailed(slicesErr) {
			return slicesErr
		}
	}
	if err := o.pair.Unauthenticate(ctx, o.DeleteNamespaces); err != nil {
		return errors.Join(slicesErr, err)
	}
	// The Tenant's deletion took the slices' copies on the provider with it.
	return handshake.ProveSlicesAgain(ctx, c, slicesErr)
}

// identify identifies the pair; when only the provider cannot be reached, the error says
// how to clean this cluster alone.
func (o *Options) identify(ctx context.Context) error {
	if err := o.pair.Identify(ctx); err != nil {
		if o.pair.Consumer.ClusterID != "" && o.pair.Provider.ClusterID == "" && handshake.Unreachable(err) {
			return fmt.Errorf("%w\nIf that cluster is gone for good, clean this one only: liqoctl unauthenticate --remote-cluster-id ID (its cluster ID)", err)
		}
		return err
	}
	return nil
}

// slicesToDelete lists the ResourceSlices the consumer asked of the provider (none when the
// API is absent), and refuses them without --delete-resourceslices: their identities would
// outlive the Tenant.
func (o *Options) slicesToDelete(ctx context.Context) ([]authv1beta1.ResourceSlice, []string, error) {
	c, pr := o.pair.Consumer, o.pair.Provider
	slices, err := handshake.SlicesFor(ctx, c, pr.ClusterID)
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, nil, c.Explain(err, "listing the ResourceSlices asked of the provider")
	}
	names := make([]string, 0, len(slices))
	for _, rs := range slices {
		names = append(names, rs.Name)
	}
	if len(names) > 0 && !o.DeleteResourceSlices {
		return nil, nil, c.Errorf("this cluster holds ResourceSlices from provider %q: %s; their identities would keep working until their certificates expire: delete them first (liqoctl delete resourceslice NAME --remote-cluster-id %s), or pass --delete-resourceslices",
			pr.ClusterID, strings.Join(names, ", "), pr.ClusterID)
	}
	return slices, names, nil
}

// RunLocal cleans this cluster only, for a peer that cannot be reached, and says what
// stays there and what its administrator runs.
func (o *Options) RunLocal(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	local, err := o.localSide(ctx)
	if err != nil {
		return err
	}
	if checkKnownPeerErr := handshake.CheckKnownPeer(ctx, local, o.RemoteClusterID, "--remote-cluster-id"); checkKnownPeerErr != nil {
		return checkKnownPeerErr
	}
	h, err := handshake.InspectPeer(ctx, local, o.RemoteClusterID)
	if err != nil {
		return err
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if h.Provider() {
		// The Tenant's and the slices' finalizers are handled by the provider's controllers.
		if ensureErr := ctrls.Ensure(ctx, authmanager.SideRole{Side: local, Role: authmanager.Provider}); ensureErr != nil {
			return ensureErr
		}
	}
	left, err := handshake.ForgetPeer(ctx, local, h, o.DeleteResourceSlices, o.DeleteNamespaces, o.Global.Clock())
	if err != nil {
		return err
	}
	for _, l := range left {
		local.Report.Warn("Left on cluster %s, %s", o.RemoteClusterID, l)
	}
	if len(left) > 0 {
		local.Report.Info("Its administrator, if it comes back, runs there: liqoctl unauthenticate --remote-cluster-id %s", local.ClusterID)
	}
	return nil
}
