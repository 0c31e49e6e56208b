package wiring

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// AfterStart drops the events of the objects an informer lists as it starts (its initial
// list), for a watch that maps a dependency to objects of the controller's own kind: the
// controller's own source enqueues every one of those from its initial list all the same.
// Such a mapping reads the cache, and during the initial list the informer of the kind it
// reads may not have synced yet: the read then waits for it with client-go's
// WaitForCacheSync, which polls every 100 ms, and a controller starts its workers only
// once each of its sources' handlers has received the initial list. A provider's
// in-process tenant controller started 100 ms late in about half the commands that way,
// its nonce Secrets' handler waiting on the Tenants' cache.
func AfterStart() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}
}

// HasLabel selects objects carrying label key=value.
func HasLabel(key, value string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[key] == value })
}

// Named selects the object ns/name alone.
func Named(ns, name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns && o.GetName() == name })
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
