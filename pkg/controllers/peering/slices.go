package peering

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// sets SlicesReady from the provider's answers. Which slices it made is the record's
// (RecordedPeering.Slices), never a label a slice writer could set. It returns when to
// read the answers again (0: every slice is decided).
func (r *Reconciler) slices(ctx context.Context, in *input, rec events.EventRecorder) time.Duration {
	p := in.peering
	made := map[string]bool{}
	if in.owned.Peering != nil {
		for _, n := range in.owned.Peering.Slices {
			made[n] = true
		}
	}
	if len(p.Spec.ResourceSlices) == 0 && len(made) == 0 {
		status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionSlicesReady, true, authv1beta1.ReasonPeeringNoSlices, "the Peering asks for no ResourceSlice", p.Generation)
		return 0
	}
	var pending, denied, accepted []string
	for _, want := range p.Spec.ResourceSlices {
		rs, err := r.ensureSlice(ctx, in, made, want)
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
	r.removeUnlisted(ctx, in, made, rec)
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

// ensureSlice creates the slice want in the tenant namespace, recorded first as made by
// the Peering, or changes the resources of one it made to the listed ones; a slice of that
// name it did not make is left alone.
func (r *Reconciler) ensureSlice(ctx context.Context, in *input, made map[string]bool, want authv1beta1.PeeringSlice) (*authv1beta1.ResourceSlice, error) {
	p, ns, providerID := in.peering, in.owned.Namespace, in.owned.RemoteID
	rs := &authv1beta1.ResourceSlice{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.Name}, rs)
	switch {
	case apierrors.IsNotFound(err):
		if !made[want.Name] {
			if recErr := r.recordSlices(ctx, providerID, func(names []string) []string { return append(names, want.Name) }); recErr != nil {
				return nil, recErr
			}
			made[want.Name] = true
		}
		rs = handshake.ForgeSlice(ns, want.Name, providerID, string(want.Class), want.Resources)
		rs.Labels[wire.PeeringLabel] = p.Name
		if createErr := r.Client.Create(ctx, rs); createErr != nil {
			return nil, fmt.Errorf("creating it: %w", createErr)
		}
		return rs, nil
	case err != nil:
		return nil, err
	case !made[want.Name]:
		return nil, fmt.Errorf("a ResourceSlice of that name, not made by this Peering, is in %s: rename one of them", ns)
	case !equality.Semantic.DeepEqual(rs.Spec.Resources, want.Resources):
		rs.Spec.Resources = want.Resources
		if err := r.Client.Update(ctx, rs); err != nil {
			return nil, fmt.Errorf("updating its resources: %w", err)
		}
	}
	return rs, nil
}

// recordSlices changes the names of the slices the record says the Peering made.
func (r *Reconciler) recordSlices(ctx context.Context, providerID string, change func([]string) []string) error {
	return r.updateRecord(ctx, providerID, func(rec *cluster.TenantRecord) {
		if rec.Peering == nil {
			rec.Peering = &cluster.RecordedPeering{}
		}
		rec.Peering.Slices = change(rec.Peering.Slices)
	})
}

// removeUnlisted deletes the slices the Peering made (as its record says) that it no
// longer lists (the consumerslice controller withdraws each from the provider), and
// forgets them.
func (r *Reconciler) removeUnlisted(ctx context.Context, in *input, made map[string]bool, rec events.EventRecorder) {
	p, ns := in.peering, in.owned.Namespace
	listed := map[string]bool{}
	for _, s := range p.Spec.ResourceSlices {
		listed[s.Name] = true
	}
	var removed []string
	for name := range made {
		if listed[name] {
			continue
		}
		rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, rs)); err != nil {
			continue
		}
		removed = append(removed, name)
	}
	if len(removed) == 0 {
		return
	}
	sort.Strings(removed)
	gone := map[string]bool{}
	for _, n := range removed {
		gone[n] = true
	}
	if err := r.recordSlices(ctx, in.owned.RemoteID, func(names []string) []string {
		return slices.DeleteFunc(names, func(n string) bool { return gone[n] })
	}); err != nil {
		return
	}
	rec.Eventf(p, nil, "Normal", authv1beta1.ReasonPeeringSlicesPending, "Slices", "ResourceSlices no longer listed removed: %s", strings.Join(removed, ", "))
}
