// Package controllertest is what the controllers' unit tests share: they run a reconciler
// on controller-runtime's fake client with a fake event recorder and a fixed clock, and
// read back what it left.
package controllertest

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
