// Package keyrotation is the provider controller of a consumer's key rotation: it moves the
// consumer's control-plane identity from its sealed key to the next one when the consumer
// proves it holds both, through the Renew named wire.KeyRotationRenewName in its tenant
// namespace (docs/protocol.md, key rotation). It verifies the request (decide.go), records
// the proven rotation in the tenant record, and moves the Tenant's spec to the new key and
// CSR: the tenant controller then accepts the change, because the record names it, seals it
// and issues the new key's certificate, binding both the old subject and the new key group.
// It answers the Renew with that certificate; once the consumer signs the end of the
// rotation with the new key, it marks the rotation done (the tenant controller drops the
// old subject) and proves with SubjectAccessReviews that the old subject may do none of the
// tenant's rules, which it records and says in an Event.
//
// Who writes what it reads: the Renew, its spec, annotations and status, the tenant itself
// (its identity may create and update Renews in its tenant namespace), anyone allowed to
// write Renews there, and status writers: nothing in it is trusted but the two signatures,
// which only the holders of the sealed key and of the new key can make, over this
// consumer, this provider, this very Tenant, both keys and the CSR; and the done signature,
// by the new key. The Tenant: as for the tenant controller (the seal only this provider
// makes). The tenant record: only the administrator and the manager; this controller writes
// the rotation into it.
package keyrotation

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// stillAllowedRecheck is when a done rotation whose old subject SubjectAccessReviews still
// allow is proven again: a grant of another binding (or another authorizer) that this
// controller does not watch.
const stillAllowedRecheck = time.Minute

// Reconciler moves consumers' identities to their next key.
type Reconciler struct {
	Client client.Client
	// APIReader reads the tenant record live where the cache may lag behind a write.
	APIReader client.Reader
	Placement placement.Placement
	Recorder  events.EventRecorder
	// Keys are this cluster's keys: a Tenant counts as accepted with a seal by any.
	Keys cluster.KeySource
	// ClusterID is this provider's: the Rotation's ProviderID.
	ClusterID string
	Now       func() time.Time
}

// SetupWithManager registers the reconciler: the key-rotation Renews, the Tenants they
// move and the Tenants' bindings (the old subject's removal is proven once they change).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	toRenew := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: wire.KeyRotationRenewName}}}
	})
	return wiring.NewController(mgr, "keyrotation", access.Provider).
		For(&authv1beta1.Renew{}, predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == wire.KeyRotationRenewName })).
		Watches(&authv1beta1.Tenant{}, toRenew).
		Watches(&rbacv1.RoleBinding{}, toRenew, wiring.HasLabel(wire.ManagedByLabel, wire.ManagedByValue)).
		WatchTenantNamespaces(wiring.Fixed(wire.KeyRotationRenewName)).
		Complete(r)
}

// Reconcile follows one key-rotation Renew.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != wire.KeyRotationRenewName {
		return ctrl.Result{}, nil
	}
	rn := &authv1beta1.Renew{}
	if err := r.Client.Get(ctx, req.NamespacedName, rn); err != nil || rn.DeletionTimestamp != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	q, err := r.gather(ctx, rn)
	if err != nil {
		return ctrl.Result{}, err
	}
	if rot := q.record.KeyRotation; recorded(q, rot) {
		return r.follow(ctx, q, rot)
	}
	v := decide(q)
	if v.rotation == nil {
		r.Recorder.Eventf(rn, nil, corev1.EventTypeWarning, v.reason, "KeyRotation", "%s", v.message)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.record(ctx, q, v)
}

// gather reads what the checks decide from, in stages: the Tenant only in the recorded
// tenant namespace.
func (r *Reconciler) gather(ctx context.Context, rn *authv1beta1.Renew) (*request, error) {
	id := string(rn.Spec.ConsumerClusterID)
	q := &request{renew: rn, providerID: r.ClusterID}
	ok, why, err := r.Placement.Verify(ctx, rn.Namespace, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		q.misplaced = why
		return q, nil
	}
	if q.record, err = cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, id); err != nil {
		return nil, err
	}
	t := &authv1beta1.Tenant{}
	if getErr := r.Client.Get(ctx, client.ObjectKey{Namespace: rn.Namespace, Name: id}, t); getErr != nil {
		if client.IgnoreNotFound(getErr) != nil {
			return nil, getErr
		}
		q.notAccepted = fmt.Sprintf("no Tenant %s/%s", rn.Namespace, id)
		return q, nil
	}
	q.tenant = t
	q.notAccepted, err = r.notAccepted(ctx, t)
	return q, err
}

// notAccepted says, in words, why the Tenant's acceptance does not count ("" when it is
// sealed by a key of this provider's set and not Drained).
func (r *Reconciler) notAccepted(ctx context.Context, t *authv1beta1.Tenant) (string, error) {
	keys, err := r.Keys.Keys(ctx)
	if err != nil {
		return "", err
	}
	if t.Status.AcceptedKeyFingerprint == "" || t.DeletionTimestamp != nil || acceptance.VerifySealedKeys(t, keys) != nil {
		return fmt.Sprintf("Tenant %s/%s carries no acceptance sealed by this provider for its spec", t.Namespace, t.Name), nil //nolint:nilerr // a verdict, not a retry
	}
	state, err := placement.TenantState(ctx, r.Client, r.Placement.LiqoNamespace, t)
	if err != nil {
		return "", err
	}
	if state == authv1beta1.TenantConditionDrained {
		return fmt.Sprintf("Tenant %s/%s is Drained", t.Namespace, t.Name), nil
	}
	return "", nil
}

// record writes the proven rotation into the tenant record (first: the tenant controller
// accepts the Tenant's new key only when it is there), then moves the Tenant's spec to the
// new key and CSR.
func (r *Reconciler) record(ctx context.Context, q *request, v *verdict) error {
	t, rot := q.tenant, v.rotation
	from := oldSubject(t)
	if err := cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, rot.ConsumerID, false, func(rec *cluster.TenantRecord) error {
		if cur := rec.KeyRotation; cur != nil && !cur.Done && cur.TenantUID == rot.TenantUID && cur.To != rot.To {
			return acceptance.Refusal(authv1beta1.ReasonKeyRotationConflict, "the tenant record holds another rotation not done")
		}
		if cur := rec.KeyRotation; cur != nil && cur.TenantUID == rot.TenantUID && cur.From == rot.From && cur.To == rot.To && cur.CSRDigest == rot.CSRDigest {
			return nil
		}
		rec.KeyRotation = cluster.NextRotation(rec.KeyRotation, cluster.KeyRotation{TenantUID: rot.TenantUID, From: rot.From, To: rot.To, CSRDigest: rot.CSRDigest,
			FromSubjectKind: from.Kind, FromSubjectName: from.Name, At: r.Now().UTC().Truncate(time.Second)})
		carryApproval(rec, rot.From, rot.To)
		return nil
	}); err != nil {
		if reason := authn.ReasonOf(err); reason != "" {
			r.Recorder.Eventf(q.renew, nil, corev1.EventTypeWarning, string(reason), "KeyRotation", "%s", err.Error())
			return nil
		}
		return err
	}
	return r.moveSpec(ctx, q, rot.ConsumerID, rot.From, rot.To)
}

// moveSpec writes the new key and CSR into the Tenant's spec (spec.signature stays: it is
// the old nonce's), with the resourceVersion read: a concurrent change is a conflict, and
// the Renew is reconciled again (then by follow, the rotation being recorded). The move
// is said in the KeyRotationRecorded Event, by whichever reconcile makes it.
func (r *Reconciler) moveSpec(ctx context.Context, q *request, consumer, from, to string) error {
	t, rn := q.tenant, q.renew
	if reflect.DeepEqual(t.Spec.PublicKey, rn.Spec.PublicKey) && reflect.DeepEqual(t.Spec.CSR, rn.Spec.CSR) {
		return nil
	}
	patch := client.MergeFromWithOptions(t.DeepCopy(), client.MergeFromWithOptimisticLock{})
	t.Spec.PublicKey, t.Spec.CSR = rn.Spec.PublicKey, rn.Spec.CSR
	if err := r.Client.Patch(ctx, t, patch); err != nil {
		return fmt.Errorf("moving Tenant %s/%s to the new key: %w", t.Namespace, t.Name, err)
	}
	r.Recorder.Eventf(rn, nil, corev1.EventTypeNormal, authv1beta1.ReasonKeyRotationRecorded, "KeyRotation",
		"the rotation of cluster %q from key %s to key %s is proven with both keys and recorded; Tenant %s/%s moves to the new key", consumer, from, to, t.Namespace, t.Name)
	return nil
}

// follow carries a recorded rotation on: the Tenant's spec moved, the Renew answered with
// the new key's certificate, and, once the consumer signed the end with the new key, the
// rotation done and the old subject proven to authorize nothing.
func (r *Reconciler) follow(ctx context.Context, q *request, rot *cluster.KeyRotation) (ctrl.Result, error) {
	if !rot.Done {
		if q.tenant.Status.AcceptedKeyFingerprint == rot.From {
			// Recorded, but the spec's move did not happen (or was undone by a Tenant writer).
			return ctrl.Result{}, r.moveSpec(ctx, q, string(q.tenant.Spec.ClusterID), rot.From, rot.To)
		}
		if q.notAccepted != "" || !answerable(q.tenant, rot) {
			return ctrl.Result{}, nil // the tenant controller is not there yet: its status change comes back here
		}
		if err := r.answer(ctx, q); err != nil {
			return ctrl.Result{}, err
		}
		if !r.doneSigned(q, rot) {
			return ctrl.Result{}, nil
		}
		if err := cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, string(q.tenant.Spec.ClusterID), false, func(rec *cluster.TenantRecord) error {
			if rec.KeyRotation != nil && rec.KeyRotation.TenantUID == rot.TenantUID && rec.KeyRotation.To == rot.To {
				rec.KeyRotation.Done = true
			}
			return nil
		}); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil // the record's change brings the Tenant's bindings, then this, back
	}
	if rot.Revoked != nil {
		return ctrl.Result{}, nil
	}
	return r.proveOldSubject(ctx, q, rot)
}

// answer publishes, in the Renew's status, the Tenant's certificate of the new key.
func (r *Reconciler) answer(ctx context.Context, q *request) error {
	ap := q.tenant.Status.AuthParams
	if reflect.DeepEqual(q.renew.Status.AuthParams, ap) {
		return nil
	}
	q.renew.Status.AuthParams = ap.DeepCopy()
	if err := r.Client.Status().Update(ctx, q.renew); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(q.renew, nil, corev1.EventTypeNormal, authv1beta1.ReasonKeyRotationAnswered, "KeyRotation",
		"published the certificate of key %s of Tenant %s/%s", q.tenant.Status.AcceptedKeyFingerprint, q.tenant.Namespace, q.tenant.Name)
	return nil
}

// doneSigned says whether the Renew carries the end of the recorded rotation signed by the
// new key (the Tenant's spec key, which the seal covers). A signature that does not verify
// is said in a Warning Event and changes nothing.
func (r *Reconciler) doneSigned(q *request, rot *cluster.KeyRotation) bool {
	if q.renew.Annotations[wire.RotationDoneSignatureAnnotation] == "" {
		return false
	}
	newKey, err := authn.ParsePublicKey(q.tenant.Spec.PublicKey)
	if err == nil {
		err = authn.VerifyRotationDone(newKey, authn.Rotation{ConsumerID: string(q.tenant.Spec.ClusterID), ProviderID: r.ClusterID, TenantUID: rot.TenantUID,
			From: rot.From, To: rot.To, CSRDigest: rot.CSRDigest}, signature(q.renew, wire.RotationDoneSignatureAnnotation))
	}
	if err != nil {
		r.Recorder.Eventf(q.renew, nil, corev1.EventTypeWarning, authv1beta1.ReasonKeyRotationDoneSignatureInvalid, "KeyRotation", "annotation %s: %v", wire.RotationDoneSignatureAnnotation, err)
		return false
	}
	return true
}

// proveOldSubject asks the API server, with SubjectAccessReviews, whether the old identity
// (its user with the groups its certificate authenticates with) may still do any of the
// tenant's rules, in its tenant namespace or anywhere; when it may not, it records the
// proof and says it in an Event.
func (r *Reconciler) proveOldSubject(ctx context.Context, q *request, rot *cluster.KeyRotation) (ctrl.Result, error) {
	id := string(q.tenant.Spec.ClusterID)
	var keyGroups []string
	if rot.FromSubjectKind == rbacv1.GroupKind {
		keyGroups = append(keyGroups, rot.FromSubjectName)
	}
	var left []string
	for _, ns := range []string{q.tenant.Namespace, ""} {
		allowed, err := revocation.AllowedActions(ctx, r.Client, id, revocation.RevocationGroups(keyGroups...), ns, access.TenantRules(q.tenant.Name))
		if err != nil {
			return ctrl.Result{}, err
		}
		left = append(left, allowed...)
	}
	if len(left) > 0 {
		if r.oldSubjectStillBound(ctx, q, rot) {
			return ctrl.Result{}, nil // the tenant controller has not dropped it yet: the binding's change comes back here
		}
		r.Recorder.Eventf(q.renew, nil, corev1.EventTypeWarning, authv1beta1.ReasonKeyRotationOldSubjectAllowed, "KeyRotation",
			"the rotation is done, but SubjectAccessReviews still allow %s %q: %v", rot.FromSubjectKind, rot.FromSubjectName, left)
		return ctrl.Result{RequeueAfter: stillAllowedRecheck}, nil
	}
	now := r.Now().UTC().Truncate(time.Second)
	if err := cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, id, false, func(rec *cluster.TenantRecord) error {
		if rec.KeyRotation != nil && rec.KeyRotation.TenantUID == rot.TenantUID && rec.KeyRotation.To == rot.To && rec.KeyRotation.Revoked == nil {
			rec.KeyRotation.Revoked = &now
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(q.renew, nil, corev1.EventTypeNormal, authv1beta1.ReasonKeyRotationDone, "KeyRotation",
		"cluster %q moved to key %s: %s %q is bound no more, and SubjectAccessReviews prove it may do none of the tenant's rules", id, rot.To, rot.FromSubjectKind, rot.FromSubjectName)
	return ctrl.Result{}, nil
}

// oldSubjectStillBound says whether one of the Tenant's own bindings, as the cache holds
// them, still names the old subject.
func (r *Reconciler) oldSubjectStillBound(ctx context.Context, q *request, rot *cluster.KeyRotation) bool {
	for _, name := range []string{wire.ControlPlaneBindingName, wire.TenantReaderName} {
		var rb rbacv1.RoleBinding
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: q.tenant.Namespace, Name: name}, &rb); err != nil {
			continue
		}
		for _, s := range rb.Subjects {
			if s.Kind == rot.FromSubjectKind && s.Name == rot.FromSubjectName {
				return true
			}
		}
	}
	return false
}

// carryApproval moves an approval of the old key (from) to the new one (to): its holder
// proved both keys. A denial covers the cluster already.
func carryApproval(rec *cluster.TenantRecord, from, to string) {
	if a := rec.Approval; a != nil && a.Decision == cluster.Approved && a.KeyFingerprint == from {
		a.KeyFingerprint = to
	}
}
