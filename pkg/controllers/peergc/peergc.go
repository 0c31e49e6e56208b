// Package peergc is the provider controller that removes what a consumer that is gone left
// behind, after a grace period its administrator sets (liqo-auth-manager
// --peer-gone-after). For each accepted Tenant it creates a presence Lease
// (wire.PresenceLeaseName) in the tenant namespace, which the consumer's manager renews
// with its own identity; a Tenant whose consumer has not renewed it for the grace period
// (counted from the Lease's creation when it never did) is deleted, with the slices given
// to that consumer: their finalizers remove bindings and requests, as unauthenticate
// would. The tenant record, with the administrator's decisions, stays.
//
// Who writes what it reads, and why a deletion never rests on a field a weaker principal
// wrote: the Tenant is collected only when its acceptance is sealed by this provider's key
// (a status writer cannot forge one); the time counted from is the Lease's, never the
// Tenant status (whose acceptedAt a status writer may back-date): the Lease's
// creationTimestamp (the API server's), the acquireTime the manager writes when it gives
// the Lease to a new Tenant, and the renewTime the consumer writes. Only the manager
// creates the Lease, and only the consumer itself renews it (by name; it may not create or
// delete one): a consumer can keep itself, not another tenant, alive, or let itself be
// collected; a time in the future counts as now. Consumers that do not renew it (Liqo's
// controllers, or liqoctl without a manager) are collected too: the controller runs only
// when the administrator asks for it.
package peergc

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler collects the Tenants of consumers that are gone.
type Reconciler struct {
	Client client.Client
	// Keys are this cluster's keys, one of whose seals says a Tenant was accepted.
	Keys cluster.KeySource
	// Live reads the presence Lease, which the manager does not cache.
	Live      client.Reader
	Placement placement.Placement
	Recorder  events.EventRecorder
	// GoneAfter is the grace period: how long a consumer may stay silent.
	GoneAfter time.Duration
	Now       func() time.Time
}

// SetupWithManager registers the reconciler for Tenants.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return wiring.NewController(mgr, "peergc", access.Provider).
		For(&authv1beta1.Tenant{}).
		Complete(r)
}

// Reconcile keeps the presence Lease of one accepted Tenant and deletes the Tenant when its
// consumer has been silent for longer than the grace period.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &authv1beta1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil || t.Status.AcceptedKeyFingerprint == "" {
		return ctrl.Result{}, nil
	}
	// A stray Tenant (misnamed, mislabelled, or outside its tenant namespace) caused
	// nothing to collect: the tenant controller's own placement check says so. Nor did
	// one whose acceptance this provider did not seal.
	if err := acceptance.CheckPlacement(ctx, r.Placement, t); err != nil {
		if authn.ReasonOf(err) != "" {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	keys, err := r.Keys.Keys(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if acceptance.VerifySealedKeys(t, keys) != nil {
		return ctrl.Result{}, nil //nolint:nilerr // an unsealed Tenant is not the manager's acceptance: nothing to collect, nothing to retry
	}
	now := r.Now()
	lease := &coordinationv1.Lease{}
	err = r.Live.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: wire.PresenceLeaseName}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return r.requeue(r.createLease(ctx, t))
	case err != nil:
		return ctrl.Result{}, err
	case !metav1.IsControlledBy(lease, t):
		// The Lease of an earlier Tenant of this consumer: its times are not this one's.
		return r.requeue(r.adoptLease(ctx, t, lease, now))
	}
	last := LastSignOfLife(lease, now)
	if left := last.Add(r.GoneAfter).Sub(now); left > 0 {
		return ctrl.Result{RequeueAfter: left + time.Second}, nil
	}
	return ctrl.Result{}, r.collect(ctx, t, last)
}

// requeue looks again after a grace period counted from now.
func (r *Reconciler) requeue(err error) (ctrl.Result, error) {
	return ctrl.Result{RequeueAfter: r.GoneAfter + time.Second}, err
}

// LastSignOfLife is the latest of the presence Lease's creation (written by the API
// server), the time the manager gave it to its Tenant and the consumer's last renewal;
// a time in the future counts as now. Ignoring a time far ahead instead would let a
// Lease writer collect a live consumer: the admission policy keeps the latest time from
// going back, so every honest renewal after a stamp a year ahead would be refused
// (TestAttack5LeaseWriterFarFutureRenewalCollectsALiveConsumer). Keeping a consumer from
// being collected takes nothing from anyone; the administrator still drains or
// unauthenticates it.
func LastSignOfLife(lease *coordinationv1.Lease, now time.Time) time.Time {
	last := lease.CreationTimestamp.Time
	for _, t := range []*metav1.MicroTime{lease.Spec.AcquireTime, lease.Spec.RenewTime} {
		if t != nil && t.After(last) {
			last = t.Time
		}
	}
	if last.After(now) {
		last = now // a time in the future is no promise
	}
	return last
}

// adoptLease gives the Lease an earlier Tenant of the same consumer left to t, counting
// from now.
func (r *Reconciler) adoptLease(ctx context.Context, t *authv1beta1.Tenant, lease *coordinationv1.Lease, now time.Time) error {
	lease.OwnerReferences = nil
	if err := controllerutil.SetControllerReference(t, lease, r.Client.Scheme()); err != nil {
		return err
	}
	lease.Spec.AcquireTime, lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now)), nil
	if err := r.Client.Update(ctx, lease); err != nil {
		return fmt.Errorf("giving the presence Lease to the Tenant: %w", err)
	}
	return nil
}

// createLease creates the presence Lease of an accepted Tenant, owned by it.
func (r *Reconciler) createLease(ctx context.Context, t *authv1beta1.Tenant) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: wire.PresenceLeaseName,
			Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: string(t.Spec.ClusterID)}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(int32(r.GoneAfter.Seconds()))},
	}
	if err := controllerutil.SetControllerReference(t, lease, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, lease); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the presence Lease: %w", err)
	}
	return nil
}

// collect deletes the Tenant of a consumer silent since last, and the slices given to it.
func (r *Reconciler) collect(ctx context.Context, t *authv1beta1.Tenant, last time.Time) error {
	var slices authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(t.Namespace)); err != nil {
		return err
	}
	for i := range slices.Items {
		rs := &slices.Items[i]
		if consumer, providerCopy := access.SliceConsumer(rs); !providerCopy || consumer != string(t.Spec.ClusterID) {
			continue
		}
		if err := r.Client.Delete(ctx, rs); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ResourceSlice %s of a consumer that is gone: %w", rs.Name, err)
		}
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonPeerGone, "CollectTenant",
		"consumer %q has not renewed its presence since %s, longer than the %s this provider waits (--peer-gone-after): its Tenant and slices are deleted; its tenant record stays",
		t.Spec.ClusterID, last.UTC().Format(time.RFC3339), r.GoneAfter)
	if err := r.Client.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the Tenant of a consumer that is gone: %w", err)
	}
	return nil
}
