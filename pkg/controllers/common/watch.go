package common

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watch is a source of events for the objects of obj's kind in c, like
// controller-runtime's source.Kind (which the builder's For, Owns and Watches
// use), with one difference: a controller waiting for it to sync is released
// the moment the handler has received the cache's initial objects.
//
// source.Kind learns that through client-go's WaitForCacheSync, which polls
// every 100 ms: whenever any object already existed, a controller started its
// workers 100 ms after it started. With the controllers started by liqoctl for
// a single command, that was most of the "Nonce is signed" step. Watch waits on
// the handler registration's done channel (HasSyncedChecker) instead.
//
// The event handling itself (predicates, tombstones, the queue) is
// controller-runtime's own, through source.Informer. An informer that cannot
// be obtained (its CRD is not installed, its kind is not in the scheme) fails
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

// Start registers the handler on the kind's informer, in the background: the
// informer may still be syncing, and Start must not block.
func (w *watch) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		w.synced <- w.register(ctx, queue)
	}()
	return nil
}

func (w *watch) register(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	inf, err := w.cache.GetInformer(ctx, w.obj)
	if err != nil {
		return fmt.Errorf("watching %T: %w", w.obj, err)
	}
	captured := &registrationOf{Informer: inf}
	src := &source.Informer{Informer: captured, Handler: w.handler, Predicates: w.preds}
	if err := src.Start(ctx, queue); err != nil {
		return fmt.Errorf("watching %T: %w", w.obj, err)
	}
	select {
	case <-captured.registration.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watching %T: the handler did not receive the initial objects: %w", w.obj, ctx.Err())
	}
}

// WaitForSync returns when the handler has received every object the cache
// held when it was registered, or with the reason it could not.
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

// For watches the objects a controller reconciles: each event enqueues the
// object itself, like the builder's For.
func For(mgr manager.Manager, obj client.Object, preds ...predicate.Predicate) source.SyncingSource {
	return Watch(mgr.GetCache(), obj, &handler.EnqueueRequestForObject{}, preds...)
}

// Owns watches objects a controller creates: each event enqueues the owner of
// type owner that controls the object, like the builder's Owns.
func Owns(mgr manager.Manager, obj, owner client.Object) source.SyncingSource {
	return Watch(mgr.GetCache(), obj, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner()))
}

func (w *watch) String() string { return fmt.Sprintf("watch source: %T", w.obj) }

// registrationOf keeps the registration that source.Informer discards.
type registrationOf struct {
	cache.Informer
	registration toolscache.ResourceEventHandlerRegistration
}

func (r *registrationOf) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := r.Informer.AddEventHandlerWithOptions(h, o)
	r.registration = reg
	return reg, err
}
