package peering

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// slices makes the consumer's ResourceSlices the Peering lists (the consumerslice
// controller asks the provider for each), removes those it made and no longer lists, and
// sets SlicesReady from the provider's answers. It returns when to read the answers again
// (0: every slice is decided).
func (r *Reconciler) slices(ctx context.Context, in *input, rec events.EventRecorder) time.Duration {
	p, ns, providerID := in.peering, in.owned.Namespace, in.owned.RemoteID
	if len(p.Spec.ResourceSlices) == 0 && !r.hasSlices(ctx, p, ns) {
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionSlicesReady, true, authv1beta1.ReasonPeeringNoSlices, "the Peering asks for no ResourceSlice", p.Generation)
		return 0
	}
	var pending, denied, accepted []string
	for _, want := range p.Spec.ResourceSlices {
		rs, err := r.ensureSlice(ctx, p, ns, providerID, want)
		if err != nil {
			denied = append(denied, fmt.Sprintf("%s: %v", want.Name, err))
			continue
		}
		switch ok, d := authv1beta1.SliceVerdict(rs.Status.Conditions); {
		case d != nil:
			denied = append(denied, fmt.Sprintf("%s: %s", want.Name, handshake.SliceDecision(rs)))
		case ok:
			accepted = append(accepted, want.Name)
		default:
			pending = append(pending, want.Name)
		}
	}
	r.removeUnlisted(ctx, p, ns, rec)
	switch {
	case len(denied) > 0:
		if status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionSlicesReady, false, authv1beta1.ReasonPeeringSliceDenied, strings.Join(denied, "; "), p.Generation) {
			rec.Eventf(p, nil, "Warning", authv1beta1.ReasonPeeringSliceDenied, "Slices", "%s", strings.Join(denied, "; "))
		}
		return deniedRecheck
	case len(pending) > 0:
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionSlicesReady, false, authv1beta1.ReasonPeeringSlicesPending,
			"waiting for the provider's answer to "+strings.Join(pending, ", "), p.Generation)
		return slicesRecheck
	}
	status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionSlicesReady, true, authv1beta1.ReasonPeeringSlicesAccepted,
		"accepted: "+strings.Join(accepted, ", "), p.Generation)
	return 0
}

// ensureSlice creates the slice want in tenant namespace ns, or changes its resources to
// the listed ones; a slice of that name the Peering did not make is left alone.
func (r *Reconciler) ensureSlice(ctx context.Context, p *authv1beta1.Peering, ns, providerID string, want authv1beta1.PeeringSlice) (*authv1beta1.ResourceSlice, error) {
	rs := &authv1beta1.ResourceSlice{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.Name}, rs)
	switch {
	case apierrors.IsNotFound(err):
		rs = handshake.ForgeSlice(ns, want.Name, providerID, string(want.Class), want.Resources)
		rs.Labels[wire.PeeringLabel] = p.Name
		if createErr := r.Client.Create(ctx, rs); createErr != nil {
			return nil, fmt.Errorf("creating it: %w", createErr)
		}
		return rs, nil
	case err != nil:
		return nil, err
	case rs.Labels[wire.PeeringLabel] != p.Name:
		return nil, fmt.Errorf("a ResourceSlice of that name, not made by this Peering, is in %s: rename one of them", ns)
	case !equality.Semantic.DeepEqual(rs.Spec.Resources, want.Resources):
		rs.Spec.Resources = want.Resources
		if err := r.Client.Update(ctx, rs); err != nil {
			return nil, fmt.Errorf("updating its resources: %w", err)
		}
	}
	return rs, nil
}

// hasSlices says whether the Peering made slices in ns.
func (r *Reconciler) hasSlices(ctx context.Context, p *authv1beta1.Peering, ns string) bool {
	var list authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wire.PeeringLabel: p.Name}); err != nil {
		return true
	}
	return len(list.Items) > 0
}

// removeUnlisted deletes the slices the Peering made in ns that it no longer lists (the
// consumerslice controller withdraws each from the provider).
func (r *Reconciler) removeUnlisted(ctx context.Context, p *authv1beta1.Peering, ns string, rec events.EventRecorder) {
	var list authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wire.PeeringLabel: p.Name}); err != nil {
		return
	}
	listed := map[string]bool{}
	for _, s := range p.Spec.ResourceSlices {
		listed[s.Name] = true
	}
	var removed []string
	for i := range list.Items {
		rs := &list.Items[i]
		if listed[rs.Name] || !rs.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, rs); client.IgnoreNotFound(err) == nil {
			removed = append(removed, rs.Name)
		}
	}
	if len(removed) > 0 {
		sort.Strings(removed)
		rec.Eventf(p, nil, "Normal", authv1beta1.ReasonPeeringSlicesPending, "Slices", "ResourceSlices no longer listed removed: %s", strings.Join(removed, ", "))
	}
}
