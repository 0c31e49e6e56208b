// Package tenantstate is liqoctl cordon, uncordon and drain tenant: the provider's
// administrator decides what a consumer may still get.
package tenantstate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Options of liqoctl cordon|uncordon|drain tenant.
type Options struct {
	Global    *cli.Global
	ClusterID string
	State     authv1beta1.TenantCondition
	Timeout   cli.Timeout
	// Controllers is --local-controllers: whose controllers handle the tenant here.
	Controllers cli.ControllersFlags
}

// NewCmds returns the cordon, uncordon and drain command groups, each with its tenant
// subcommand.
func NewCmds(g *cli.Global) []*cobra.Command {
	groups := []struct {
		verb, short, long string
		state             authv1beta1.TenantCondition
	}{
		{"cordon", "Stop giving a consumer anything new (provider)", `On the provider: set the consumer's Tenant Cordoned. Its certificates and ResourceSlices
are kept and renewed, but it gets no new ResourceSlice and, while it has none, no new
certificate.`, authv1beta1.TenantConditionCordoned},
		{"uncordon", "Let a cordoned or drained consumer get access again (provider)", `On the provider: set the consumer's Tenant Active again; its access is granted again.`, authv1beta1.TenantConditionActive},
		{"drain", "Take everything a consumer was given away, and prove it (provider)", `On the provider: set the consumer's Tenant Drained. Its ResourceSlices are deleted, with
their identities' access, and its control-plane access is removed; then SubjectAccessReviews
prove that none of those identities may do anything it was granted. The Tenant stays:
uncordon gives access back without a new handshake.`, authv1beta1.TenantConditionDrained},
	}
	var out []*cobra.Command
	for _, gr := range groups {
		o := &Options{Global: g, State: gr.state}
		sub := &cobra.Command{Short: gr.short, Long: gr.long, Example: fmt.Sprintf("  liqoctl %s tenant cl-consumer", gr.verb)}
		o.Timeout.AddFlags(sub)
		o.Controllers.AddLocalFlag(sub)
		out = append(out, tenantGroup(g, gr.verb, sub, &o.ClusterID, o.Run, o.Controllers.Validate))
	}
	return out
}

// consumerNamespace connects to this cluster, the provider, and finds the tenant namespace
// of consumer id.
func consumerNamespace(ctx context.Context, g *cli.Global, id string) (*handshake.Side, string, error) {
	s, err := g.LocalSide(ctx, "")
	if err != nil {
		return nil, "", err
	}
	tn, err := s.TenantNamespace(ctx, id)
	if err != nil {
		return nil, "", fmt.Errorf("no tenant namespace for consumer %q (%w)", id, err)
	}
	return s, tn, nil
}

// tenantGroup returns the command group verb with sub as its "tenant CLUSTER_ID"
// subcommand: it takes the cluster ID, checks it and the flags (validate), then runs run.
func tenantGroup(g *cli.Global, verb string, sub *cobra.Command, id *string, run func(context.Context) error, validate ...func() error) *cobra.Command {
	sub.Use = "tenant CLUSTER_ID"
	sub.Aliases = []string{"tenants"}
	sub.Args = cobra.ExactArgs(1)
	sub.ValidArgsFunction = cli.RemoteClusterIDCompletion(g)
	sub.RunE = func(cmd *cobra.Command, args []string) error {
		*id = args[0]
		if err := cli.ValidateClusterIDFlag("CLUSTER_ID", *id); err != nil {
			return err
		}
		for _, v := range validate {
			if err := v(); err != nil {
				return err
			}
		}
		return run(cmd.Context())
	}
	group := &cobra.Command{Use: verb, Short: sub.Short, Args: cobra.NoArgs}
	group.AddCommand(sub)
	return group
}

// Run records the administrator's decision in the tenant record, where the tenant cannot
// write, mirrors it into the Tenant's spec.tenantCondition (what Liqo's tools read) when
// there is a Tenant, and, for drain, waits for and proves the revocation.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, tn, err := consumerNamespace(ctx, o.Global, o.ClusterID)
	if err != nil {
		return err
	}
	t := &authv1beta1.Tenant{}
	if getErr := s.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: o.ClusterID}, t); getErr != nil {
		if !apierrors.IsNotFound(getErr) {
			return s.Explain(getErr, "reading the Tenant of "+o.ClusterID)
		}
		t = nil
	}
	slices, err := providerSlices(ctx, s, tn)
	if err != nil {
		return err
	}
	if err := cli.ApplyControllers(ctx, s, o.Controllers.Local); err != nil {
		return err
	}
	ctrls := authmanager.NewInProcess(o.Global)
	defer ctrls.Stop()
	if t != nil {
		if err := ctrls.Ensure(ctx, authmanager.SideRole{Side: s, Role: authmanager.Provider}); err != nil {
			return err
		}
	}
	if err := o.record(ctx, s); err != nil {
		return err
	}
	if t == nil {
		s.Report.Info("Cluster %s is %s: it has no Tenant now, and the decision holds for its next handshake", o.ClusterID, o.State)
		return nil
	}
	if t.Spec.TenantCondition != o.State {
		patch := client.MergeFrom(t.DeepCopy())
		t.Spec.TenantCondition = o.State
		if err := s.Client.Patch(ctx, t, patch, client.FieldOwner(wire.TenantStateFieldOwner)); err != nil {
			return s.Explain(err, "setting the Tenant "+string(o.State))
		}
	}
	s.Report.Info("Tenant %s/%s is %s", tn, o.ClusterID, o.State)
	switch o.State {
	case authv1beta1.TenantConditionCordoned:
		s.Report.Info("%d ResourceSlices kept; no new slice and no new certificate for a consumer without one", len(slices))
	case authv1beta1.TenantConditionActive:
		s.Report.Info("Access granted again; the consumer may ask for ResourceSlices")
	case authv1beta1.TenantConditionDrained:
		return o.drained(ctx, s, t, slices)
	}
	return nil
}

// record writes the decision into the tenant record: the state in force is the stricter
// of it and the Tenant's spec, so neither a patch of the Tenant nor a new handshake takes
// it back.
func (o *Options) record(ctx context.Context, s *handshake.Side) error {
	state := string(o.State)
	if o.State == authv1beta1.TenantConditionActive {
		state = ""
	}
	err := cluster.UpdateTenantRecord(ctx, s.Client, s.Client, s.Namespace, o.ClusterID, false, func(rec *cluster.TenantRecord) error {
		rec.State = state
		return nil
	})
	if err != nil {
		return s.Explain(err, "recording the state of "+o.ClusterID)
	}
	return nil
}

// providerSlices lists the slices consumers copied into tenant namespace tn.
func providerSlices(ctx context.Context, s *handshake.Side, tn string) ([]authv1beta1.ResourceSlice, error) {
	var list authv1beta1.ResourceSliceList
	if err := s.Client.List(ctx, &list, client.InNamespace(tn), client.MatchingLabels{wire.ReplicationStatusLabel: "true"}); err != nil {
		return nil, s.Explain(err, "listing the ResourceSlices")
	}
	return list.Items, nil
}

// drained waits until the tenant's slices are gone and its access removed, then proves
// with SubjectAccessReviews that neither its control-plane identity nor any slice
// identity may do what it was granted.
func (o *Options) drained(ctx context.Context, s *handshake.Side, t *authv1beta1.Tenant, slices []authv1beta1.ResourceSlice) error {
	id := string(t.Spec.ClusterID)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left, err := providerSlices(ctx, s, t.Namespace)
		if err != nil {
			return false, err
		}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(t), t); err != nil {
			return false, err
		}
		if s.Controllers().Liqo() {
			// Liqo's controllers write no condition: the bindings' removal is the answer.
			still, err := revocation.ProveRevoked(ctx, s.Client, s.Client, id, t.Namespace, access.RevocationRules(id))
			return len(left) == 0 && len(still) == 0, err
		}
		c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionAccessGranted)
		return len(left) == 0 && c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == t.Generation, nil
	})
	if err != nil {
		return s.Explain(err, "waiting for the tenant's ResourceSlices and access to be removed")
	}
	s.Report.Info("%d ResourceSlices deleted", len(slices))
	// Every key group of the consumer's key-bound certificates is proven too.
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, id)
	if err != nil {
		return s.Explain(err, "reading the tenant record")
	}
	// The bindings were deleted a moment ago: the authorizer may not have seen it yet.
	left, err := revocation.Settled(ctx, revocation.AuthorizerLag, func(ctx context.Context) ([]string, error) {
		return drainedLeft(ctx, s, id, t.Namespace, rec.ControlPlaneKeyGroups(), slices)
	})
	if err != nil {
		return s.Explain(err, "verifying the revocation")
	}
	if len(left) > 0 {
		return fmt.Errorf("%w: %s", handshake.ErrAccessNotRevoked, strings.Join(left, "; "))
	}
	s.Report.Info("Access of the control plane and of %d slice identities revoked: verified", len(slices))
	return nil
}

// drainedLeft is what a Drained tenant's identities may still do in namespace ns: its
// user, with every key group, of what its tenant role granted, and each slice identity of
// what its slice granted.
func drainedLeft(ctx context.Context, s *handshake.Side, id, ns string, keyGroups []string, slices []authv1beta1.ResourceSlice) ([]string, error) {
	left, err := revocation.ProveRevoked(ctx, s.Client, s.Client, id, ns, access.RevocationRules(id), keyGroups...)
	if err != nil {
		return nil, err
	}
	for _, rs := range slices {
		user := authn.SliceUserName(rs.Name, id)
		got, err := revocation.AllowedActions(ctx, s.Client, user, []string{id, "system:authenticated"}, ns, access.SliceRules(rs.Name))
		if err != nil {
			return nil, err
		}
		for _, a := range got {
			left = append(left, fmt.Sprintf("%s (slice %s) may %s", user, rs.Name, a))
		}
	}
	return left, nil
}
