// Package designation makes a tenant namespace of a namespace another tool created with
// the labels of the protocol (Liqo's liqoctl, run by this cluster's administrator), when
// the API server recorded that its creator may make tenant records: the administrator's
// act that liqoctl of this project performs itself (cluster.EnsureTenantNamespace). The
// labels alone, which anyone who may create a namespace can set, never make one.
package designation

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler designates tenant namespaces by their recorded creator.
type Reconciler struct {
	// Client reads through the cache and writes; Live reads what a decision rests on.
	Client        client.Client
	Live          client.Reader
	LiqoNamespace string
	Recorder      events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Grace is how long a namespace made with the tenant labels is left to the liqoctl that
// made it, which records it right after creating it, before this controller designates it:
// racing liqoctl would only double the writes of every handshake.
const Grace = 2 * time.Second

// SetupWithManager registers the reconciler for namespaces labelled as tenant
// namespaces, and for the records that name them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		remote := o.GetLabels()[wire.RemoteClusterIDLabel]
		if remote == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: wire.TenantNamespaceName(remote)}}}
	})
	return wiring.NewController(mgr, "designation", access.Provider).
		For(&corev1.Namespace{}).
		Watches(&corev1.ConfigMap{}, toNamespace, wiring.HasLabel(wire.TenantRecordLabel, "true")).
		Complete(r)
}

// Reconcile designates one namespace, or says why not.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	remote := ns.Labels[wire.RemoteClusterIDLabel]
	creator, candidate := r.candidate(ns, remote)
	if !candidate {
		return ctrl.Result{}, nil
	}
	if res, settled, err := r.settled(ctx, ns, remote); settled {
		return res, err
	}
	allowed, err := cluster.MayRecord(ctx, r.Client, r.LiqoNamespace, creator)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !allowed {
		r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, authv1beta1.ReasonTenantNamespaceNotDesignated, "Designate",
			"not a tenant namespace: its creator %q may not make tenant records in namespace %q; this cluster's administrator makes one with liqoctl authenticate, create nonce or generate tenant", creator.User, r.LiqoNamespace)
		return ctrl.Result{}, nil
	}
	if err := cluster.UpdateTenantRecord(ctx, r.Client, r.Live, r.LiqoNamespace, remote, true, func(rec *cluster.TenantRecord) error {
		rec.Namespace, rec.NamespaceUID = ns.Name, ns.UID
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	if err := cluster.EnsureManagerTenantBinding(ctx, r.Client, r.LiqoNamespace, ns.Name); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(ns, nil, corev1.EventTypeNormal, authv1beta1.ReasonTenantNamespaceDesignated, "Designate",
		"tenant namespace of cluster %q: created by %q, who may make tenant records", remote, creator.User)
	return ctrl.Result{}, nil
}

// candidate is Reconcile's first decision, on the namespace alone: a live tenant namespace
// of remote, under its protocol name, whose creator was recorded and is read exactly. An
// unreadable creator is said in an event; every other miss is silent, as it was inline.
func (r *Reconciler) candidate(ns *corev1.Namespace, remote string) (cluster.Creator, bool) {
	if ns.DeletionTimestamp != nil || !cluster.IsTenantNamespaceOf(ns, remote) || ns.Name != wire.TenantNamespaceName(remote) {
		return cluster.Creator{}, false
	}
	creator, ok, err := cluster.NamespaceCreator(ns)
	if !ok {
		return creator, false
	}
	if err != nil {
		r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, authv1beta1.ReasonTenantNamespaceNotDesignated, "Designate",
			"not a tenant namespace: its creator cannot be read exactly (%v); this cluster's administrator makes one with liqoctl authenticate, create nonce or generate tenant", err)
		return creator, false
	}
	return creator, true
}

// settled is Reconcile's second decision, on the tenant record: true when there is nothing
// to decide now, with the result to return: the record names this namespace already (in
// the cache, or in a live read once the namespace is past Grace), the namespace is still
// left to the liqoctl that made it (a requeue), or a read failed.
func (r *Reconciler) settled(ctx context.Context, ns *corev1.Namespace, remote string) (ctrl.Result, bool, error) {
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.LiqoNamespace, remote)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if recordsNamespace(rec, ns) {
		return ctrl.Result{}, true, nil // recorded already, by liqoctl or by this controller
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	if age := now().Sub(ns.CreationTimestamp.Time); age < Grace {
		return ctrl.Result{RequeueAfter: Grace - age}, true, nil
	}
	// liqoctl records the namespaces it makes right after making them: the cache may
	// not show it yet.
	if rec, err = cluster.GetTenantRecord(ctx, r.Live, r.LiqoNamespace, remote); err != nil || recordsNamespace(rec, ns) {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{}, false, nil
}

// recordsNamespace tells whether rec names ns, by name and UID.
func recordsNamespace(rec *cluster.TenantRecord, ns *corev1.Namespace) bool {
	return rec != nil && rec.Namespace == ns.Name && rec.NamespaceUID == ns.UID
}
