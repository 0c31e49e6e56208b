// Package controllertest is what the controllers' unit tests share: they run a reconciler
// on controller-runtime's fake client with a fake event recorder and a fixed clock, and
// read back what it left.
package controllertest

import (
	"context"
	"reflect"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Events drains the Events rec recorded so far, as "Type Reason Note".
func Events(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// Reconcile runs r on key and reads the object back from c into obj: it returns the
// result, the reconcile's error, and whether the object is still there.
func Reconcile(t *testing.T, r reconcile.Reconciler, c client.Reader, key client.ObjectKey, obj client.Object) (ctrl.Result, bool, error) {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if gerr := c.Get(context.Background(), key, obj); apierrors.IsNotFound(gerr) {
		return res, false, err
	} else if gerr != nil {
		t.Fatal(gerr)
	}
	return res, true, err
}

// Counting is interceptor.Funcs that passes every write through to the fake client and
// tells note about it first: verb is "create", "update", "patch" or "delete", sub the
// subresource ("" for the object itself). A test that also plays the API server (a
// SubjectAccessReview, which a fake client cannot answer) wraps the Create it returns.
func Counting(note func(verb string, obj client.Object, sub string)) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			note("create", obj, "")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			note("update", obj, "")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			note("patch", obj, "")
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			note("delete", obj, "")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			note("update", obj, sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			note("patch", obj, sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// Kind names a write's object as the tests count it: "Identity", or "Identity/status" for
// a subresource.
func Kind(obj client.Object, sub string) string {
	kind := reflect.TypeOf(obj).Elem().Name()
	if sub != "" {
		kind += "/" + sub
	}
	return kind
}

// Writes counts a reconciler's writes by "verb Kind[/sub]" (Note, given to Counting), from
// Start on: the set-up's own writes are not counted.
type Writes struct {
	mu sync.Mutex
	on bool
	n  map[string]int
}

// Start counts from now on, from zero.
func (w *Writes) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on, w.n = true, map[string]int{}
}

// Note counts one write, once Start was called.
func (w *Writes) Note(verb string, obj client.Object, sub string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.n[verb+" "+Kind(obj, sub)]++
	}
}

// Take returns the writes counted so far and counts again from zero.
func (w *Writes) Take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	taken := w.n
	w.n = map[string]int{}
	return taken
}

// Indexer registers a cache's indexes with a fake client being built, as a manager's
// field indexer registers them with its cache.
type Indexer struct{ B *fake.ClientBuilder }

// IndexField implements client.FieldIndexer.
func (i Indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.B.WithIndex(obj, field, fn)
	return nil
}
