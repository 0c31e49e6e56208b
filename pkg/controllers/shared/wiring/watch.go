package wiring

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watch is a source of events for the objects of obj's kind in c, for the builder's
// WatchesRawSource. It behaves like controller-runtime's source.Kind (what the builder's
// For, Owns and Watches use) with one difference: a controller waiting for it to sync is
// released the moment its handler has received the objects the cache held, instead of at
// the next round of client-go's WaitForCacheSync, which polls: controllers started by
// liqoctl for one command must not wait for a polling period they do not need.
//
// It uses only exported, documented API: the cache's GetInformer (without blocking until
// synced), the informer's AddEventHandlerWithOptions, the done channel of the handler
// registration (HasSyncedChecker), and controller-runtime's handler, event and predicate
// types; and it relies on one documented contract, that a controller calls a
// SyncingSource's WaitForSync before it starts its workers (TestWatch checks both). An
// informer that cannot be obtained (a CRD not installed, a kind not in the scheme) fails
// the controller's start with that error instead of being retried.
func Watch(c cache.Cache, obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) source.SyncingSource {
	return &watch{cache: c, obj: obj, handler: h, preds: preds, synced: make(chan error, 1)}
}

type watch struct {
	cache   cache.Cache
	obj     client.Object
	handler handler.EventHandler
	preds   []predicate.Predicate
	synced  chan error
	cancel  context.CancelFunc
}

var _ source.SyncingSource = &watch{}

// Start registers the handler on the kind's informer, in the background: the informer may
// still be syncing, and Start must not block.
func (w *watch) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	ctx, w.cancel = context.WithCancel(ctx)
	go func() { w.synced <- w.register(ctx, queue) }()
	return nil
}

func (w *watch) register(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	inf, err := w.cache.GetInformer(ctx, w.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching %T: %w", w.obj, err)
	}
	reg, err := inf.AddEventHandlerWithOptions(w.events(ctx, queue), toolscache.HandlerOptions{})
	if err != nil {
		return fmt.Errorf("watching %T: %w", w.obj, err)
	}
	select {
	case <-reg.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watching %T: the handler did not receive the initial objects: %w", w.obj, ctx.Err())
	}
}

// events turns informer notifications into handler events, filtered by the predicates, as
// controller-runtime's own sources do (tombstones included).
func (w *watch) events(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			e := event.CreateEvent{Object: o, IsInInitialList: initial}
			if w.pass(func(p predicate.Predicate) bool { return p.Create(e) }) {
				w.handler.Create(ctx, e, queue)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(client.Object)
			n, okNew := newObj.(client.Object)
			if !okOld || !okNew {
				return
			}
			e := event.UpdateEvent{ObjectOld: o, ObjectNew: n}
			if w.pass(func(p predicate.Predicate) bool { return p.Update(e) }) {
				w.handler.Update(ctx, e, queue)
			}
		},
		DeleteFunc: func(obj any) {
			e := event.DeleteEvent{}
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj, e.DeleteStateUnknown = tombstone.Obj, true
			}
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			e.Object = o
			if w.pass(func(p predicate.Predicate) bool { return p.Delete(e) }) {
				w.handler.Delete(ctx, e, queue)
			}
		},
	}
}

func (w *watch) pass(ok func(predicate.Predicate) bool) bool {
	for _, p := range w.preds {
		if !ok(p) {
			return false
		}
	}
	return true
}

// WaitForSync returns when the handler has received every object the cache held when it
// was registered, or with the reason it could not.
func (w *watch) WaitForSync(ctx context.Context) error {
	select {
	case err := <-w.synced:
		w.synced <- err // later callers get the same answer
		return err
	case <-ctx.Done():
		if w.cancel != nil {
			w.cancel()
		}
		return fmt.Errorf("timed out waiting for the watch on %T to sync: %w", w.obj, ctx.Err())
	}
}

func (w *watch) String() string { return fmt.Sprintf("watch source: %T", w.obj) }
