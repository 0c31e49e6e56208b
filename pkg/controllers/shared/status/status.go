// Package status is how a controller reports: conditions (escaped, set only when they
// change), status writes only on change, and Events (short, escaped, and deferred until
// the status they describe is saved).
package status

import (
	"context"
	"fmt"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

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
