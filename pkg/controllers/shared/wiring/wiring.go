// Package wiring registers a controller and what wakes it: controller-runtime's builder
// checked against access.ManagerWatched (Controller), event sources that sync on their
// handlers (Watch), predicates and the handlers that map an event to the objects to
// reconcile.
package wiring

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Controller is controller-runtime's builder for one of liqo-auth-manager's controllers,
// in the shape of the builder's For, Owns and Watches, with the event sources of Watch.
// Every kind it watches must be declared in access.ManagerWatched for the controller's
// role: the manager's cache, the kinds a runner waits for and the manager's read
// permissions are derived from that table, so a watch registered here and not declared
// there fails the setup instead of drifting.
type Controller struct {
	b    *builder.Builder
	mgr  manager.Manager
	name string
	role access.Role
	err  error
}

// NewController starts the registration of controller name, run on the role's side.
func NewController(mgr manager.Manager, name string, role access.Role) *Controller {
	return &Controller{b: ctrl.NewControllerManagedBy(mgr).Named(name), mgr: mgr, name: name, role: role}
}

// watch registers a source of events for obj's kind, once the table declares it.
func (c *Controller) watch(obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) *Controller {
	if c.err != nil {
		return c
	}
	for _, w := range access.WatchedBy(c.role) {
		if reflect.TypeOf(w.Object) == reflect.TypeOf(obj) {
			c.b = c.b.WatchesRawSource(Watch(c.mgr.GetCache(), obj, h, preds...))
			return c
		}
	}
	c.err = fmt.Errorf("controller %s watches %T, which access.ManagerWatched does not declare for the %s side", c.name, obj, c.role)
	return c
}

// For watches the objects the controller reconciles: each event enqueues the object
// itself, like the builder's For.
func (c *Controller) For(obj client.Object, preds ...predicate.Predicate) *Controller {
	return c.watch(obj, &handler.EnqueueRequestForObject{}, preds...)
}

// Owns watches objects the controller creates: each event enqueues the owner of type owner
// that controls the object, like the builder's Owns.
func (c *Controller) Owns(obj, owner client.Object) *Controller {
	return c.watch(obj, handler.EnqueueRequestForOwner(c.mgr.GetScheme(), c.mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner()))
}

// Watches maps the events of obj's kind to requests with h, like the builder's Watches.
func (c *Controller) Watches(obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) *Controller {
	return c.watch(obj, h, preds...)
}

// Reads keeps the cache's informer of obj's kind synced for a controller that reads that
// kind without reconciling on its events: the controller starts once it is synced, so its
// first read never waits for the cache.
func (c *Controller) Reads(obj client.Object) *Controller {
	return c.watch(obj, handler.Funcs{})
}

// WatchTenantNamespaces adds the watches that keep the controller's placement checks
// (tenant records and namespaces) synced, enqueueing name(remoteID) on their changes.
func (c *Controller) WatchTenantNamespaces(name func(remoteID string) string) *Controller {
	h := OnTenantRecord(name)
	return c.watch(&corev1.ConfigMap{}, h, HasLabel(wire.TenantRecordLabel, "true")).watch(&corev1.Namespace{}, h)
}

// Workers has the controller reconcile up to n objects at once, in place of the manager's
// default (authmanager.Workers).
func (c *Controller) Workers(n int) *Controller {
	c.b = c.b.WithOptions(controller.Options{MaxConcurrentReconciles: n})
	return c
}

// Complete registers the controller with the manager, or says which watch was not declared.
func (c *Controller) Complete(r reconcile.Reconciler) error {
	if c.err != nil {
		return c.err
	}
	return c.b.Complete(r)
}
