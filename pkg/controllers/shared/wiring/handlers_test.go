package wiring

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestAfterStart: an object an informer lists as it starts maps to nothing (the
// controller's own source enqueues its objects then); every later event passes.
func TestAfterStart(t *testing.T) {
	p, o := AfterStart(), &corev1.Secret{}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"created, in the initial list", p.Create(event.CreateEvent{Object: o, IsInInitialList: true}), false},
		{"created after the start", p.Create(event.CreateEvent{Object: o}), true},
		{"updated", p.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: o}), true},
		{"deleted", p.Delete(event.DeleteEvent{Object: o}), true},
		{"generic", p.Generic(event.GenericEvent{Object: o}), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: passes = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
