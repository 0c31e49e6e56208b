// Package common holds what several reconcilers share: the tenant-namespace check,
// label predicates and condition bookkeeping.
package common

import (
	"context"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Placement decides whether a namespace is the tenant namespace of a remote cluster, by
// this cluster's own record (cluster.VerifyTenantNamespace), never by the namespace's
// labels alone. It reads the cache first and, when the cache says no, the API server: a
// record or namespace made a moment ago may not be cached yet, and a refusal must be true.
type Placement struct {
	// Cache and Live read the cluster (Live may be nil).
	Cache, Live client.Reader
	// LiqoNamespace holds the tenant records.
	LiqoNamespace string
}

// Verify reports whether ns is the tenant namespace of remoteID, and why not.
func (p Placement) Verify(ctx context.Context, ns, remoteID string) (ok bool, why string, err error) {
	ok, why, err = cluster.VerifyTenantNamespace(ctx, p.Cache, p.LiqoNamespace, ns, remoteID)
	if err != nil || ok || p.Live == nil {
		return ok, why, err
	}
	return cluster.VerifyTenantNamespace(ctx, p.Live, p.LiqoNamespace, ns, remoteID)
}

// HasLabel selects objects carrying label key=value.
func HasLabel(key, value string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[key] == value })
}

// SetCondition sets a condition and reports whether anything but its timestamp changed.
func SetCondition(conds *[]metav1.Condition, typ string, ok bool, reason, msg string, generation int64) bool {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	msg = authv1beta1.EscapeText(msg) // it often quotes what the other cluster wrote
	old := meta.FindStatusCondition(*conds, typ)
	changed := old == nil || old.Status != status || old.Reason != reason || old.Message != msg || old.ObservedGeneration != generation
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation})
	return changed
}

// PlacedSecret reads the Secret of a request and returns it, with the remote cluster its
// label names, only when it is named name and sits in that cluster's tenant namespace (as
// p decides). A
// misplaced Secret gets a Warning Event with reason misplaced and is ignored (nil).
func PlacedSecret(ctx context.Context, c client.Reader, p Placement, rec events.EventRecorder, key client.ObjectKey, name, misplaced, action string) (*corev1.Secret, string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	if s.Name != name || s.DeletionTimestamp != nil {
		return nil, "", nil
	}
	remote := s.Labels[wire.RemoteClusterIDLabel]
	ok, why, err := p.Verify(ctx, s.Namespace, remote)
	if err != nil || !ok {
		if err == nil {
			rec.Eventf(s, nil, corev1.EventTypeWarning, misplaced, action, "ignored: %s", why)
		}
		return nil, "", err
	}
	return s, remote, nil
}

// maxNote is the longest Event note the API server accepts (events.k8s.io/v1: 1 kB).
const maxNote = 1024

// ShortNotes wraps an EventRecorder so that every note fits in an Event: a longer one
// (a refusal listing many bindings) would be rejected by the API server and lost. The
// full text stays in the object's condition.
func ShortNotes(rec events.EventRecorder) events.EventRecorder { return shortNotes{rec} }

type shortNotes struct{ events.EventRecorder }

// Eventf records the Event with its note cut to maxNote bytes, on a rune boundary.
func (s shortNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := authv1beta1.EscapeText(fmt.Sprintf(note, args...)) // it often quotes what the other cluster wrote
	if len(msg) > maxNote {
		const more = " […]"
		cut := maxNote - len(more)
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + more
	}
	s.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", msg)
}

// SaveStatus writes obj's status when changed. It reports saved=false, with no error, when
// the write lost a race (a conflict: the cache was behind; or the object is gone): the
// newer object's event brings the request back, so nothing that follows a saved status
// must run now.
func SaveStatus(ctx context.Context, c client.Client, obj client.Object, changed bool) (saved bool, err error) {
	if !changed {
		return true, nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// OnTenantRecord enqueues, for each change of a tenant record (or of a namespace labelled
// as a tenant namespace), the object named name(remoteID) in the tenant namespace: a
// record made after an object was refused brings that object back.
func OnTenantRecord(name func(remoteID string) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		remote := o.GetLabels()[wire.RemoteClusterIDLabel]
		ns := o.GetName() // a namespace
		if cm, ok := o.(*corev1.ConfigMap); ok {
			ns = cm.Data["namespace"]
		}
		if remote == "" || ns == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name(remote)}}}
	})
}

// Fixed returns a name function that ignores the remote ID.
func Fixed(name string) func(string) string { return func(string) string { return name } }

// InNamespaceOf maps an object to every object of list's kind in its namespace (those
// keep accepts, all when keep is nil): a change of what they depend on (a Tenant, a
// nonce) enqueues them all.
func InNamespaceOf[L client.ObjectList](c client.Reader, newList func() L, keep func(client.Object) bool) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			obj, ok := it.(client.Object)
			if ok && (keep == nil || keep(obj)) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
		}
		return out
	}
}

// TenantState reads the administrative state in force for Tenant t: the stricter of its
// spec.tenantCondition and the state the provider's administrator recorded for its
// cluster (cluster.StateInForce). The record is read through c (the cache, which a
// record's change reaches before it enqueues the Tenant again).
func TenantState(ctx context.Context, c client.Reader, liqoNS string, t *authv1beta1.Tenant) (authv1beta1.TenantCondition, error) {
	rec, err := cluster.GetTenantRecord(ctx, c, liqoNS, string(t.Spec.ClusterID))
	if err != nil {
		return "", err
	}
	return cluster.StateInForce(rec, t.Spec.TenantCondition), nil
}

// Deferred is an EventRecorder for one reconcile whose Events are recorded only by Flush,
// once the status that announces them is saved: a reconcile of a stale copy, whose status
// write loses the race, announces nothing twice.
type Deferred struct {
	rec     events.EventRecorder
	pending []func()
}

// NewDeferred returns a Deferred recording into rec.
func NewDeferred(rec events.EventRecorder) *Deferred { return &Deferred{rec: rec} }

// Eventf keeps the Event until Flush.
func (d *Deferred) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	d.pending = append(d.pending, func() { d.rec.Eventf(regarding, related, eventtype, reason, action, note, args...) })
}

// Flush records the Events kept so far.
func (d *Deferred) Flush() {
	for _, f := range d.pending {
		f()
	}
	d.pending = nil
}
