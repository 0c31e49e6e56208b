package wiring

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// TestEnqueueByPlacement: in a priority queue, an object in its place is served before
// every object out of place enqueued ahead of it; one from the informer's first list, or
// a resync, waits low even in its place; one enqueued low is raised by an event that finds
// it in its place; a deletion is served at the default.
func TestEnqueueByPlacement(t *testing.T) {
	ctx := context.Background()
	placed := map[string]bool{"honest": true, "listed": true, "resynced": true}
	h := EnqueueByPlacement(func(_ context.Context, o client.Object) bool { return placed[o.GetName()] })
	obj := func(name, rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	for i := range 100 {
		h.Create(ctx, event.CreateEvent{Object: obj(fmt.Sprintf("garbage-%d", i), "1")}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: obj("listed", "1"), IsInInitialList: true}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj("resynced", "5"), ObjectNew: obj("resynced", "5")}, q)
	h.Create(ctx, event.CreateEvent{Object: obj("raised", "1")}, q) // out of place when created
	h.Create(ctx, event.CreateEvent{Object: obj("honest", "1")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: obj("garbage-deleted", "1")}, q)
	placed["raised"] = true
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj("raised", "1"), ObjectNew: obj("raised", "2")}, q)

	var first []string
	for range 3 {
		item, priority, _ := q.GetWithPriority()
		if priority != 0 {
			t.Fatalf("%s served at priority %d before the default ones", item.Name, priority)
		}
		first = append(first, item.Name)
		q.Done(item)
	}
	want := map[string]bool{"honest": true, "raised": true, "garbage-deleted": true}
	for _, n := range first {
		if !want[n] {
			t.Fatalf("served first: %v, want %v", first, want)
		}
	}
	if got := q.Len(); got != 102 {
		t.Fatalf("%d requests left low, want 102 (100 garbage, listed, resynced)", got)
	}
	_, priority, _ := q.GetWithPriority()
	if priority != handler.LowPriority {
		t.Fatalf("the rest served at priority %d, want %d", priority, handler.LowPriority)
	}
}
