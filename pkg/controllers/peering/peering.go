// Package peering is the consumer's controller of Peerings: a peering declared with
// kubectl apply alone. It runs the handshake of liqoctl authenticate (pkg/handshake, the
// same steps) with the provider's peering user the bootstrap Secret holds, reports each
// step as an Event and where it stands as conditions, has the peering user retire itself
// once the Identity is ready (a bootstrap credential is single use), asks for the slices
// the Peering lists, and, when the Peering is deleted, leaves the provider with the
// consumer's own identity and proves that it holds nothing there any more.
//
// Who writes what it reads. Peerings and the bootstrap Secret: only Peerings of the Liqo
// namespace are carried out, and that namespace is written by this cluster's
// administrator (or a GitOps controller acting for them): trusted, as the tenant records
// are. A Peering's status may be written by a status writer: nothing is decided from it.
// Which provider a Peering peered with, and which bootstrap credentials were used, are in
// the consumer's tenant record (Liqo namespace), where no tenant and no status writer
// writes: a deleted Peering leaves the provider its record names, never one its status
// names. The Identity is read for its Ready condition and certificate, which the identity
// controller sets after its own checks; an Identity writer in the tenant namespace may
// change its spec, which that controller refuses, and a status writer its status, which
// only changes what the Peering says, never what it does: the handshake's own Inspect
// decides whether a handshake is needed from the Identity and the provider's Tenant.
package peering

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Finalizer holds a Peering until the consumer left its provider.
const Finalizer = "authentication.liqo.io/peering"

// Steps are the two-cluster steps the controller runs, pkg/handshake's by default
// (replaced in unit tests).
type Steps struct {
	// Authenticate runs the handshake of the pair (Inspect, then Authenticate).
	Authenticate func(ctx context.Context, p *handshake.Pair) (*authv1beta1.Identity, error)
	// Retire has the peering user of side pr retire itself, proven.
	Retire func(ctx context.Context, pr *handshake.Side) error
	// Leave has consumer c leave provider providerID with its own identity, proven.
	Leave func(ctx context.Context, c *handshake.Side, providerID string, now time.Time) error
}

// Reconciler carries out the Peerings of the Liqo namespace.
type Reconciler struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// APIReader reads live: the bootstrap Secret, which the cache may not hold.
	APIReader client.Reader
	// Consumer returns this cluster as the consumer side of a handshake (a live client
	// that can watch), reporting through r.
	Consumer func(r handshake.Reporter) (*handshake.Side, error)
	// Dial returns the provider side reached with kubeconfig (embedded credentials only),
	// reporting through r.
	Dial func(kubeconfig *authn.KubeconfigInfo, r handshake.Reporter) (*handshake.Side, error)
	// Steps are the two-cluster steps.
	Steps Steps
	// LiqoNamespace is where Peerings are carried out; ClusterID is this cluster's.
	LiqoNamespace, ClusterID string
	Recorder                 events.EventRecorder
	// AttemptTimeout bounds one handshake attempt (a reconcile).
	AttemptTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// SetupWithManager registers the reconciler: Peerings of the Liqo namespace, woken by
// their bootstrap Secret, their Identity and their slices.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	inLiqoNS := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.LiqoNamespace })
	all := handler.EnqueueRequestsFromMapFunc(r.allPeerings)
	return wiring.NewController(mgr, "peering", access.Consumer).
		// Spec changes and deletion (both bump the generation), not status writes: the
		// controller's own would wake it again at once, and a status writer's decide nothing.
		For(&authv1beta1.Peering{}, inLiqoNS, predicate.GenerationChangedPredicate{}).
		Watches(&corev1.Secret{}, all, inLiqoNS, wiring.AfterStart()).
		Watches(&authv1beta1.Identity{}, all, wiring.AfterStart()).
		Watches(&authv1beta1.ResourceSlice{}, all, predicate.NewPredicateFuncs(func(o client.Object) bool { _, ok := o.GetLabels()[wire.PeeringLabel]; return ok }), wiring.AfterStart()).
		Complete(r)
}

// allPeerings enqueues every Peering of the Liqo namespace: they are few, and what woke
// them (a Secret, an Identity, a slice) is matched in the reconcile, not here.
func (r *Reconciler) allPeerings(ctx context.Context, _ client.Object) []reconcile.Request {
	var list authv1beta1.PeeringList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.LiqoNamespace)); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return out
}

// Reconcile carries out one Peering: leaves when it is deleted, else peers (or says why
// not), then retires the bootstrap credential and asks for the slices.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != r.LiqoNamespace {
		return ctrl.Result{}, nil
	}
	p := &authv1beta1.Peering{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rec := status.NewDeferred(r.Recorder)
	defer rec.Flush()
	if !p.DeletionTimestamp.IsZero() {
		return r.leave(ctx, p, rec)
	}
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		controllerutil.AddFinalizer(p, Finalizer)
		if err := r.Client.Update(ctx, p); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	orig := p.DeepCopy()
	in, err := r.load(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	v, err := r.peer(ctx, in, rec)
	if err != nil {
		return ctrl.Result{}, err
	}
	requeue := v.requeue
	if v.state == authv1beta1.PeeringPeered {
		if again := r.afterPeered(ctx, in, rec); again > 0 && again < requeue {
			requeue = again
		}
	}
	r.setReady(p, v, rec)
	if _, err := status.SaveStatus(ctx, r.Client, p, statusChanged(orig, p)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// load gathers the decision's input: the record this Peering owns and its Identity, and,
// when there is no ready Identity, the bootstrap credential and whether it was used.
func (r *Reconciler) load(ctx context.Context, p *authv1beta1.Peering) (*input, error) {
	in := &input{peering: p, now: r.now(), clusterID: r.ClusterID}
	records, err := cluster.ListTenantRecords(ctx, r.Client, r.LiqoNamespace)
	if err != nil {
		return nil, err
	}
	for _, rec := range records {
		if rec.Peering != nil && rec.Peering.UID == string(p.UID) {
			in.owned = rec
		}
	}
	if in.owned != nil && in.owned.Namespace != "" {
		id := &authv1beta1.Identity{}
		key := client.ObjectKey{Namespace: in.owned.Namespace, Name: wire.IdentityName(in.owned.RemoteID)}
		if err := r.Client.Get(ctx, key, id); err == nil {
			in.identity = id
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	if in.identity != nil && in.ranHandshake() && peeredVerdict(in).state == authv1beta1.PeeringPeered {
		return in, nil
	}
	if err := r.loadBootstrap(ctx, in, records); err != nil {
		return nil, err
	}
	return in, nil
}

// loadBootstrap is load's second stage: the bootstrap Secret, its kubeconfig and
// certificate, and the record (of any provider) that says it was used.
func (r *Reconciler) loadBootstrap(ctx context.Context, in *input, records []*cluster.TenantRecord) error {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: in.peering.Namespace, Name: in.peering.Spec.BootstrapSecretRef.Name}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the bootstrap Secret: %w", err)
	}
	in.secret = s
	data, ok := s.Data[KubeconfigKey]
	if !ok {
		in.kubeconfigErr = fmt.Errorf("no data key %q", KubeconfigKey)
		return nil
	}
	in.kubeconfig, in.kubeconfigErr = authn.ReadKubeconfig(data)
	if in.kubeconfigErr != nil {
		return nil //nolint:nilerr // a decision: checkKubeconfig turns the refusal into the Peering's condition
	}
	cert, err := authn.ParseCertificate(in.kubeconfig.CertPEM)
	if err != nil {
		in.kubeconfig, in.kubeconfigErr = nil, fmt.Errorf("its client certificate: %w", err)
		return nil
	}
	in.cert = cert
	for _, rec := range records {
		if rec.ConsumedBootstrap(cert.SerialNumber.Text(16)) != nil {
			in.consumedBy = rec
		}
	}
	return nil
}

// setReady sets the Peering's state, Ready condition and what it describes from v, with
// an Event when the condition changed.
func (r *Reconciler) setReady(p *authv1beta1.Peering, v *verdict, rec events.EventRecorder) {
	p.Status.State = v.state
	p.Status.ObservedGeneration = p.Generation
	if status.SetCondition(&p.Status.Conditions, authv1beta1.ConditionReady, v.state == authv1beta1.PeeringPeered, v.reason, v.message, p.Generation) {
		kind := corev1.EventTypeNormal
		if v.state == authv1beta1.PeeringFailed || v.reason == authv1beta1.ReasonPeeringLeaveFailed {
			kind = corev1.EventTypeWarning
		}
		rec.Eventf(p, nil, kind, v.reason, "Peer", "%s", v.message)
	}
}

// statusChanged says whether the status differs from orig's, timestamps of unchanged
// conditions aside (SetCondition keeps them).
func statusChanged(orig, p *authv1beta1.Peering) bool {
	return !equality.Semantic.DeepEqual(orig.Status, p.Status)
}

// reporter collects the handshake's progress lines of one attempt, for one Event on the
// Peering (Events of one object, reason and action are merged into a series that keeps
// only the first note); warnings are Events of their own at once.
type reporter struct {
	rec     events.EventRecorder
	peering *authv1beta1.Peering
	scope   string
	lines   *[]string
}

func (r reporter) Info(format string, args ...any) {
	*r.lines = append(*r.lines, "("+r.scope+") "+fmt.Sprintf(format, args...))
}

func (r reporter) Warn(format string, args ...any) {
	r.rec.Eventf(r.peering, nil, corev1.EventTypeWarning, authv1beta1.ReasonPeeringWarning, "Handshake", "(%s) %s", r.scope, fmt.Sprintf(format, args...))
}

// steps are the progress lines of one attempt, on both sides.
type steps struct {
	rec     events.EventRecorder
	peering *authv1beta1.Peering
	lines   []string
}

// side is the reporter of one side.
func (s *steps) side(scope string) reporter {
	return reporter{rec: s.rec, peering: s.peering, scope: scope, lines: &s.lines}
}

// flush records the lines as one Event, in order.
func (s *steps) flush() {
	if len(s.lines) > 0 {
		s.rec.Eventf(s.peering, nil, corev1.EventTypeNormal, authv1beta1.ReasonPeeringStep, "Handshake", "%s", strings.Join(s.lines, "; "))
		s.lines = nil
	}
}

// timeOf is t as a metav1.Time pointer (nil for the zero time).
func timeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
