// Package tenant is the provider controller of Tenants. It verifies a consumer's
// handshake exactly once, consumes the nonce, has the consumer's CSR signed by the
// cluster's client signer, binds the control-plane role in the tenant namespace, renews
// the certificate before it expires, and follows the administrative state
// (Active, Cordoned, Drained) and, when the administrator requires it, their approval of
// the consumer's sealed key (approval.go). An accepted Tenant gets a finalizer that
// removes everything it caused; a refused one causes nothing and gets none from it (liqoctl
// applies its Tenant with the finalizer already on where a manager runs, and any Tenant
// writer may: every Tenant deleted is finalized, so the manager lets it go).
//
// Who writes what it reads: the Tenant's spec and metadata, the consumer (through
// liqoctl, a peering user or the administrator) and Tenant writers; its status, status
// writers too (an acceptance counts only with this provider's seal); the tenant record
// and liqo-auth-config, only the administrator (and the manager, the record).
package tenant

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// Reconciler reconciles Tenants.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Placement placement.Placement
	Recorder  events.EventRecorder
	Options   issuing.Options
	// Keys are this cluster's keys: the current one seals each acceptance; a seal by any
	// key of the set holds until it is sealed again with the current one.
	Keys cluster.KeySource
	// Self is the identity the manager talks to the API server as: the only requester
	// whose CertificateSigningRequests it approves.
	Self authenticationv1.UserInfo
	// Metrics count the handshakes decided and the certificates issued (nil: none).
	Metrics *metrics.Metrics
	Now     func() time.Time
	// Signatures, when set, let the reconcile that approves a certificate request wait
	// for the signer (issuer.Issuer.Signatures).
	Signatures *issuer.Signatures

	issuerOnce sync.Once
	iss        *issuer.Issuer
}

// issuer is the Reconciler's issuer of certificates, made at first use.
func (r *Reconciler) issuer() *issuer.Issuer {
	r.issuerOnce.Do(func() {
		r.iss = &issuer.Issuer{Client: r.Client, APIReader: r.APIReader, Self: r.Self, Lifetime: r.Options.CertificateLifetime, CSRTimeout: r.Options.CSRTimeout, Signatures: r.Signatures}
	})
	return r.iss
}

// Workers is how many Tenants the controller reconciles at once: the handshakes' writes
// are made by these reconciles, each a dozen API calls in sequence, and the API server,
// etcd and the CSR signer spend less CPU on each handshake when more arrive together
// (their writes, watch events and work queues batch): a thousand consumers at once take
// about 6 % less time and CPU at 64 than at the other controllers' 16, for 10 MiB more at
// the manager's peak (docs/benchmarks.md, history).
const Workers = 64

// SetupWithManager registers the reconciler: Tenants, their bindings, their CSRs, and
// the nonce Secrets they wait for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	// checkNotSliceUser looks the cluster ID up in this index instead of reading every
	// tenant record at each handshake.
	if err := cluster.IndexSliceUsers(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := issuer.IndexByOwner(context.Background(), mgr.GetFieldIndexer(), wire.TenantAnnotation); err != nil {
		return err
	}
	b := wiring.NewController(mgr, "tenant", access.Provider).
		Workers(Workers).
		For(&authv1beta1.Tenant{}).
		Owns(&rbacv1.RoleBinding{}, &authv1beta1.Tenant{}).
		Owns(&rbacv1.Role{}, &authv1beta1.Tenant{}).
		Watches(&certificatesv1.CertificateSigningRequest{}, handler.EnqueueRequestsFromMapFunc(csrToTenant),
			wiring.HasLabel(wire.ManagedByLabel, wire.ManagedByValue)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(nonceToTenant), wiring.HasLabel(wire.NonceLabel, "true"), wiring.AfterStart()).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.everyTenantOn(wire.ConfigMapName)), wiring.HasLabel(wire.ManagedByLabel, wire.ManagedByValue), wiring.AfterStart()).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.everyTenantOn(wire.KeysSecretName)), wiring.Named(r.Placement.LiqoNamespace, wire.KeysSecretName), wiring.AfterStart()).
		Reads(&rbacv1.ClusterRoleBinding{}).
		Reads(&authv1beta1.ResourceSlice{})
	return b.WatchTenantNamespaces(func(remoteID string) string { return remoteID }).Complete(r)
}

// deleteLeftovers deletes the CertificateSigningRequests this manager made for a Tenant of
// this name other than the one that holds it now (current, "" when none does). Such a
// request outlives its Tenant when no finalizer took it back: one stripped the moment it
// landed, or a Tenant deleted and made again under its name while its reconcile went on
// (TestAttack48PeeringUserStripsTheFinalizerMidReconcile,
// TestAttack48TenantRecreatedUnderThePatch). A request's creation brings its Tenant's
// reconcile (csrToTenant), so each is found here, in the cache; the API server is asked
// only when there is one to delete. The Tenant's bindings name it as their controller:
// the garbage collector takes them.
func (r *Reconciler) deleteLeftovers(ctx context.Context, key types.NamespacedName, current types.UID) error {
	return r.issuer().DeleteLeftovers(ctx, wire.TenantAnnotation, key, current,
		issuer.LiveUID(r.APIReader, authv1beta1.GroupVersion.WithKind("Tenant"), key))
}

func csrToTenant(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[wire.TenantAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// nonceToTenant maps a nonce Secret to the one Tenant that may use it: the Tenant named
// after the cluster its label names, in its namespace (verify reads the nonce by that
// name and label; a Tenant named otherwise is refused for its name, nonce or not). Every
// Tenant of the namespace, as before, let a namespace creator have a whole flood of
// Tenants decided again with one Secret.
func nonceToTenant(_ context.Context, o client.Object) []reconcile.Request {
	id := o.GetLabels()[wire.RemoteClusterIDLabel]
	if o.GetName() != wire.NonceSecretName || id == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: id}}}
}

// Reconcile drives one Tenant towards its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &authv1beta1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, errors.Join(r.deleteLeftovers(ctx, req.NamespacedName, ""),
			ownedrbac.DeleteOrphans(ctx, r.Client, r.Client, access.AccessObjects(req.Namespace, req.Name, nil)),
			r.deleteCopiesOfGone(ctx, req.NamespacedName))
	}
	if err := r.deleteLeftovers(ctx, req.NamespacedName, t.UID); err != nil {
		return ctrl.Result{}, err
	}
	if t.DeletionTimestamp != nil {
		return r.finalize(ctx, t)
	}
	placed := acceptance.CheckPlacement(ctx, r.Placement, t)
	if placed != nil && authn.ReasonOf(placed) == "" {
		return ctrl.Result{}, placed
	}
	before := t.Status.DeepCopy()
	var d decided
	res, err := r.reconcile(ctx, t, placed, &d)
	if err != nil {
		return ctrl.Result{}, err
	}
	t.Status.ObservedGeneration = t.Generation
	if saved, err := status.SaveStatus(ctx, r.Client, t, !equality.Semantic.DeepEqual(before, &t.Status)); !saved || err != nil {
		return ctrl.Result{}, err
	}
	r.count(before, &t.Status, d)
	return res, errors.Join(r.afterStatus(ctx, t), d.afterSave)
}

// reconcile computes the Tenant status; only what it writes outside the Tenant happens
// here, before the status is saved.
// d records what it decided that the metrics count once the status is saved.
func (r *Reconciler) reconcile(ctx context.Context, t *authv1beta1.Tenant, placed error, d *decided) (ctrl.Result, error) {
	now := r.Now()
	if placed != nil {
		return ctrl.Result{}, r.refuse(t, placed)
	}
	if refused, err := r.authenticate(ctx, t, now, d); refused || err != nil {
		return ctrl.Result{}, err
	}
	t.Status.TenantNamespace = t.Namespace
	// The tenant record holds the administrator's decisions: the state and a renewal asked
	// for now. Read once, here.
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, string(t.Spec.ClusterID))
	if err != nil {
		return ctrl.Result{}, err
	}
	state := cluster.StateInForce(rec, t.Spec.TenantCondition)
	t.Status.TenantCondition = state
	// What the status publishes is repaired first, from what this provider published: the
	// approval and the certificate decision read it.
	if checkPublishedErr := r.checkPublished(ctx, t, rec, now); checkPublishedErr != nil {
		return ctrl.Result{}, checkPublishedErr
	}
	approval, err := r.approval(ctx, t, rec)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.setApproved(t, approval)
	res, err := r.carryOutAccepted(ctx, t, rec, state, approval, now, d)
	r.setReady(t)
	return res, err
}

// carryOutAccepted carries out what an accepted Tenant's state and approval decide: its
// finalizer first, then its access and its certificate at once, for neither waits on the
// other's answer. The reviews that decide whether a certificate may be requested
// (checkSubmission) run beside the finalizer's patch.
//
// Accepted, the Tenant is about to cause something (bindings, a CSR): only now does it get
// the finalizer, and nothing is caused unless it took it. A Tenant created with it (liqoctl's,
// where a manager runs) needs no patch: a deletion waits for the finalize, which reads live
// what this reconcile made, and a Tenant made again under its name meanwhile finds the
// requests of the old one deleted (deleteLeftovers) and its bindings collected (they name
// the old one as their controller). A refused or stray Tenant causes
// nothing, and a finalizer nothing would remove would make kubectl delete hang for good
// where no manager runs; a Tenant being deleted refuses the finalizer, and a binding made
// for it would outlive it for as long as another finalizer keeps it
// (TestAttack47TenantDeletedWhileAccessIsGranted).
//
// Each works on its own: the access on a copy of the Tenant, whose AccessGranted condition
// t takes over once both are done; the reviews on another copy; the certificate on t.
func (r *Reconciler) carryOutAccepted(ctx context.Context, t *authv1beta1.Tenant, rec *cluster.TenantRecord, state authv1beta1.TenantCondition, approval approvalVerdict, now time.Time, d *decided) (ctrl.Result, error) {
	a := decideCertificate(r.certificateFacts(t, state, rec, approval, now))
	issuing := a.verb == certIssue || a.verb == certRenew
	var check *pendingCheck
	if issuing {
		check = r.startCheckSubmission(ctx, t)
		defer check.finish()
	}
	if finErr := r.addFinalizer(ctx, t); finErr != nil {
		// A Tenant that cannot take the finalizer (one being deleted refuses new ones) gets
		// nothing: no access that no finalizer would take back while other finalizers keep
		// it, no request.
		return ctrl.Result{}, finErr
	}
	forAccess := t.DeepCopy()
	var accessErr error
	var wg sync.WaitGroup
	wg.Go(func() { accessErr = r.reconcileAccess(ctx, forAccess, rec, state, approval) })
	res, certErr := ctrl.Result{RequeueAfter: a.requeueAfter}, error(nil)
	if issuing {
		res, certErr = r.issueCertificate(ctx, t, a, now, d, check.wait)
	} else {
		r.carryOut(t, a)
	}
	wg.Wait()
	switch {
	case certErr != nil || (accessErr != nil && d.certificate == ""):
		return ctrl.Result{}, errors.Join(accessErr, certErr)
	case accessErr != nil:
		// The certificate published now is saved with the status, as it would have been had
		// the access been carried out first; the AccessGranted condition stays what it was
		// (the Tenant is not Ready before its first access), and the access is tried again.
		d.afterSave = accessErr
		return res, nil
	}
	if c := meta.FindStatusCondition(forAccess.Status.Conditions, authv1beta1.ConditionAccessGranted); c != nil {
		status.SetCondition(&t.Status.Conditions, c.Type, c.Status == metav1.ConditionTrue, c.Reason, c.Message, t.Generation)
	}
	return res, nil
}

// authenticate verifies the Tenant's handshake, unless the acceptance its status records
// is sealed by this provider for its spec: it accepts a handshake that verifies (the nonce
// consumed), or refuses the Tenant (refused: nothing more is decided). An error without a
// reason is transient.
func (r *Reconciler) authenticate(ctx context.Context, t *authv1beta1.Tenant, now time.Time, d *decided) (refused bool, err error) {
	keys, err := r.Keys.Keys(ctx)
	if err != nil {
		return false, err
	}
	// A key its consumer rotated away from is refused first, on every path: a seal kept
	// from before the rotation still verifies over the old spec it covered.
	if rotatedAwayErr := r.checkNotRotatedAway(ctx, t); rotatedAwayErr != nil {
		return true, r.refuse(t, rotatedAwayErr)
	}
	var sealErr error
	if t.Status.AcceptedKeyFingerprint != "" {
		var by crypto.Signer
		by, sealErr = acceptance.SealedBy(t, keys)
		if sealErr == nil {
			r.reaffirm(t)
			return false, r.reseal(t, keys, by)
		}
		if authn.ReasonOf(sealErr) == authv1beta1.ReasonHandshakeChanged {
			if moved, rotErr := r.acceptRotation(ctx, t, keys, now); moved || rotErr != nil {
				return false, rotErr
			}
		}
	}
	if checkNotSliceUserErr := r.checkNotSliceUser(ctx, t); checkNotSliceUserErr != nil {
		return true, r.refuse(t, checkNotSliceUserErr)
	}
	acc, err := verifyHandshake(ctx, r.Client, r.APIReader, t, r.Options.NonceTTL, now)
	if err == nil {
		d.accepted, err = r.consumeNonce(ctx, t, acc, now)
	}
	if err != nil {
		return true, r.refuse(t, r.refuseRecorded(t, keys, sealErr, err))
	}
	return false, r.accept(t, keys, acc, now)
}

// reaffirm sets Authenticated again when the sealed acceptance holds again (a write that
// made the Tenant refused was undone): a refusal lasts only as long as its cause, or the
// peering would stay broken until someone deleted the Tenant. Not a new handshake:
// nothing is counted.
func (r *Reconciler) reaffirm(t *authv1beta1.Tenant) {
	if c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionAuthenticated); c == nil || c.Status != metav1.ConditionTrue {
		r.setCondition(t, authv1beta1.ConditionAuthenticated, true, authv1beta1.ReasonHandshakeAccepted, acceptedMessage(t.Status.AcceptedKeyFingerprint), "")
	}
}

// reconcileAccess follows the state in force with the Tenant's bindings: a Drained tenant
// loses them (and SubjectAccessReviews prove it), a Cordoned one keeps those it has and
// gets none new, an Active one gets them.
//
// The approval weighs as the state does: a denied key's tenant loses its bindings as a
// Drained one, a pending key's gets none new as a Cordoned one.
func (r *Reconciler) reconcileAccess(ctx context.Context, t *authv1beta1.Tenant, rec *cluster.TenantRecord, state authv1beta1.TenantCondition, approval approvalVerdict) error {
	if state == authv1beta1.TenantConditionDrained || approval.denied() {
		why := "the tenant is Drained"
		if state != authv1beta1.TenantConditionDrained {
			why = "the provider's administrator denied its key"
		}
		still, err := r.revokeAccess(ctx, t, rec)
		if err != nil {
			return err
		}
		if still != "" {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, true, authv1beta1.ReasonAccessStillAllowed, why+", but SubjectAccessReviews still allow: "+still, corev1.EventTypeWarning)
		} else {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, false, authv1beta1.ReasonAccessRevoked, why+": its bindings were removed and SubjectAccessReviews confirm every permission is denied", corev1.EventTypeNormal)
		}
		return nil
	}
	granted, err := r.ensureAccess(ctx, t, rec, state == authv1beta1.TenantConditionCordoned || approval.pending())
	if err != nil {
		return err
	}
	switch {
	case granted:
		r.setCondition(t, authv1beta1.ConditionAccessGranted, true, authv1beta1.ReasonAccessGranted, fmt.Sprintf("user %q may use role %s in namespace %q", t.Spec.ClusterID, wire.ControlPlaneRoleName, t.Namespace), "")
	case approval.pending():
		r.setCondition(t, authv1beta1.ConditionAccessGranted, false, authv1beta1.ReasonApprovalPending, "no access is granted until the provider's administrator approves: "+approval.message, corev1.EventTypeNormal)
	default:
		r.setCondition(t, authv1beta1.ConditionAccessGranted, false, authv1beta1.ReasonCordonedNoGrant, "the tenant is Cordoned: no new access is granted", corev1.EventTypeNormal)
	}
	return nil
}

// issueCertificate carries out an issuance or a renewal a (decideCertificate, for a
// Tenant whose status checkPublished repaired): the request goes to the signer, once check
// allows it, and what it came to is decided again (afterIssuance).
func (r *Reconciler) issueCertificate(ctx context.Context, t *authv1beta1.Tenant, a certAction, now time.Time, d *decided, check func(context.Context) (*issuer.Issuance, error)) (ctrl.Result, error) {
	renewing := a.verb == certRenew
	is, err := r.ensureCertificate(ctx, t, now, check)
	if err != nil {
		return ctrl.Result{}, err
	}
	if a = afterIssuance(is, renewing); a.verb == certPublish {
		return r.recordAndPublish(ctx, t, is, renewing, now, d)
	}
	r.carryOut(t, a)
	return ctrl.Result{RequeueAfter: a.requeueAfter}, nil
}

// carryOut does in the status what a certificate action that publishes nothing says: the
// one place where such an action sets the CertificateIssued condition.
func (r *Reconciler) carryOut(t *authv1beta1.Tenant, a certAction) {
	switch a.verb {
	case certRefuse:
		r.setCondition(t, authv1beta1.ConditionCertificateIssued, false, a.reason, a.message, a.eventType)
	case certRenewFailed:
		r.Recorder.Eventf(t, nil, a.eventType, a.reason, "RenewCertificate", "%s", a.message)
		r.Metrics.Certificate(metrics.KindControlPlane, metrics.OutcomeFailed)
		if t.Status.LastRefusal == nil || t.Status.LastRefusal.Reason != a.reason {
			r.noteRefusal(t, a.reason)
		}
	}
}

// recordAndPublish records the certificate the signer issued in the tenant record, then
// publishes it in the status; the reconcile comes back at its renewal time.
func (r *Reconciler) recordAndPublish(ctx context.Context, t *authv1beta1.Tenant, is *issuer.Issuance, renewing bool, now time.Time, d *decided) (ctrl.Result, error) {
	// Recorded before it is published: a certificate Kubernetes cannot revoke is listed
	// until it expires, even after the Tenant is gone.
	caFP, err := authn.CAFingerprint(r.Options.CA)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("the CA handed to consumers is not valid: %w", err)
	}
	if err := cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID), false, func(rec *cluster.TenantRecord) error {
		rec.AddCertificate(cluster.IssuedCertificate{Serial: is.Cert.SerialNumber.Text(16), NotAfter: is.Cert.NotAfter, KeyFingerprint: t.Status.AcceptedKeyFingerprint}, now)
		rec.PublishedCAFingerprint, rec.PublishedAPIServer = caFP, r.Options.APIServer
		rec.PublishedCertificate, rec.PublishedForTenant = string(is.PEM), string(t.UID)
		if renewing && rec.RenewSerial == t.Status.Certificate.SerialNumber {
			rec.RenewSerial = "" // the renewal asked for is done: it is asked for once
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	reason := authv1beta1.ReasonCertificateIssued
	d.certificate = metrics.OutcomeIssued
	if renewing {
		reason, d.certificate = authv1beta1.ReasonCertificateRenewed, metrics.OutcomeRenewed
		t.Status.LastRenewal = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	r.publish(t, is.Cert, is.PEM, reason, corev1.EventTypeNormal)
	return ctrl.Result{RequeueAfter: t.Status.Certificate.RenewAfter.Sub(now)}, nil
}

// publish writes in the status the certificate this provider issued, or puts back the one
// it published: the certificate, its description and the condition that announces it,
// together, so that a Tenant never publishes a certificate under a condition that still
// says it waits for one (a put-back after a status save that lost a race did, and the
// Tenant stayed not Ready until its renewal). eventType "" records no Event.
func (r *Reconciler) publish(t *authv1beta1.Tenant, cert *x509.Certificate, pem []byte, reason, eventType string) {
	t.Status.AuthParams = &authv1beta1.AuthParams{APIServer: r.Options.APIServer, CA: r.Options.CA, SignedCRT: pem, ProxyURL: t.Spec.ProxyURL}
	t.Status.Certificate = issuer.CertificateInfo(cert, r.Options.RenewBefore)
	r.setCondition(t, authv1beta1.ConditionCertificateIssued, true, reason,
		fmt.Sprintf("certificate %s valid until %s, renewed after %s", t.Status.Certificate.SerialNumber,
			cert.NotAfter.UTC().Format(time.RFC3339), t.Status.Certificate.RenewAfter.UTC().Format(time.RFC3339)), eventType)
}

// consumeNonce makes the nonce of a verified handshake single-use. The consumption is
// written to the tenant record, which the tenant cannot write, before the acceptance is
// saved: a nonce already consumed by another key or CSR is refused, while the same
// handshake applied again (a Liqo consumer re-running, or a status save that failed)
// converges; a replay in a re-created Tenant does not. The nonce Secret itself is kept
// as it is, for Liqo consumers expect it: the record alone says it is consumed.
func (r *Reconciler) consumeNonce(ctx context.Context, t *authv1beta1.Tenant, acc *verified, now time.Time) (fresh bool, err error) {
	nonce := string(acc.nonce.Data[wire.NonceField])
	err = cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID), false, func(rec *cluster.TenantRecord) error {
		fresh = false // the update may run again, on a conflict
		if rec.Consumed(nonce, acc.fingerprint) {
			return acceptance.Refusal(authv1beta1.ReasonNonceConsumed, "the nonce in namespace %q was already used, at %s, by the handshake of another key: a nonce is single-use; start a new handshake (liqoctl create nonce, or liqoctl authenticate)",
				t.Namespace, rec.ConsumedNonce.At.UTC().Format(time.RFC3339))
		}
		c := rec.ConsumedNonce
		if c == nil || c.Digest != cluster.NonceDigest(nonce) || c.TenantUID != string(t.UID) || c.CSRDigest != acc.csrDigest || c.SecretUID != string(acc.nonce.UID) {
			rec.ConsumedNonce = &cluster.ConsumedNonce{Digest: cluster.NonceDigest(nonce), TenantUID: string(t.UID), KeyFingerprint: acc.fingerprint, CSRDigest: acc.csrDigest,
				SecretUID: string(acc.nonce.UID), At: now.UTC().Truncate(time.Second)}
			fresh = true
		}
		return nil
	})
	return fresh && err == nil, err
}

// afterStatus runs what must follow a saved status: a CSR is deleted only once its
// certificate is published. (The consumed nonce is not marked: the tenant record says it
// is consumed, before the acceptance is saved, and is what every reader asks.)
func (r *Reconciler) afterStatus(ctx context.Context, t *authv1beta1.Tenant) error {
	if t.Status.Certificate != nil {
		// A CSR is done once its certificate is published: only a pending one, which a
		// renewal may be waiting for, is kept.
		return r.issuer().DeleteCSRs(ctx, r.Client, t.UID, true)
	}
	return nil
}

func (r *Reconciler) accept(t *authv1beta1.Tenant, keys cluster.KeySet, acc *verified, now time.Time) error {
	seal, err := authn.SealAcceptance(keys.Current, authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID),
		KeyFingerprint: acc.fingerprint, CSRDigest: acc.csrDigest})
	if err != nil {
		return fmt.Errorf("sealing the acceptance: %w", err)
	}
	t.Status.AcceptedKeyFingerprint = acc.fingerprint
	t.Status.AcceptedCSRDigest = acc.csrDigest
	t.Status.AcceptanceSeal = seal
	t.Status.AcceptedAt = &metav1.Time{Time: now}
	// Whatever the status published before this acceptance, this provider did not publish
	// for it (a status writer may have filled it ahead of the first acceptance): the
	// certificate is issued anew.
	t.Status.AuthParams, t.Status.Certificate = nil, nil
	// No Event: the condition says it, and the Event of the certificate that follows
	// closes the handshake (two fewer writes per handshake).
	r.setCondition(t, authv1beta1.ConditionAuthenticated, true, authv1beta1.ReasonHandshakeAccepted, acceptedMessage(acc.fingerprint), "")
	return nil
}

// acceptedMessage is the message of the Authenticated condition of a handshake accepted
// for the key with fingerprint fp.
func acceptedMessage(fp string) string {
	return fmt.Sprintf("the nonce signature and the CSR of key %s were verified; the nonce is consumed", fp)
}

// refuseRecorded words the refusal of a Tenant whose recorded acceptance no longer holds
// and whose handshake does not verify (again). A recorded acceptance that this provider
// never sealed was written by someone else: it is wiped, with what it claimed to have
// issued, so that nothing downstream takes it for true.
func (r *Reconciler) refuseRecorded(t *authv1beta1.Tenant, keys cluster.KeySet, sealErr, err error) error {
	switch {
	case sealErr == nil:
		return err
	case authn.ReasonOf(sealErr) == authv1beta1.ReasonHandshakeChanged:
		return acceptance.Refusal(authv1beta1.ReasonHandshakeChanged, "spec.publicKey or spec.csr changed after the handshake was accepted, and the new handshake is refused: %v", err)
	}
	if acceptance.RecordedSealedBy(t, keys) == nil {
		t.Status.AcceptedKeyFingerprint, t.Status.AcceptedCSRDigest, t.Status.AcceptanceSeal, t.Status.AcceptedAt = "", "", nil, nil
		t.Status.AuthParams, t.Status.Certificate = nil, nil
	}
	return acceptance.Refusal(authn.ReasonAcceptanceSealInvalid, "the acceptance recorded in the status was not sealed by this provider (%v), and the handshake does not verify: %v", sealErr, err)
}

// refuse records a refusal: a condition and, when it is new, a Warning Event. Nothing is
// signed and nothing is granted.
func (r *Reconciler) refuse(t *authv1beta1.Tenant, err error) error {
	reason := authn.ReasonOf(err)
	if reason == "" {
		return err
	}
	r.setCondition(t, authv1beta1.ConditionAuthenticated, false, string(reason), err.Error(), corev1.EventTypeWarning)
	r.setReady(t)
	return nil
}

// setCondition sets a condition and, when it changed, records an Event of eventType for a
// warning or a success ("" records none).
func (r *Reconciler) setCondition(t *authv1beta1.Tenant, typ string, ok bool, reason, msg, eventType string) {
	if !status.SetCondition(&t.Status.Conditions, typ, ok, reason, msg, t.Generation) || eventType == "" {
		return
	}
	if eventType == corev1.EventTypeWarning || ok {
		r.Recorder.Eventf(t, nil, eventType, reason, typ, "%s", msg)
	}
	if eventType == corev1.EventTypeWarning && (typ == authv1beta1.ConditionAuthenticated || typ == authv1beta1.ConditionCertificateIssued) {
		r.noteRefusal(t, reason)
	}
}

// noteRefusal records in the status the last refusal of the handshake or a certificate.
func (r *Reconciler) noteRefusal(t *authv1beta1.Tenant, reason string) {
	t.Status.LastRefusal = &authv1beta1.Refusal{Reason: reason, Time: metav1.Time{Time: r.Now().Truncate(time.Second)}}
}

// notAFailure reports whether a reason of a False CertificateIssued is no failure to issue.
func notAFailure(reason string) bool {
	switch reason {
	case authv1beta1.ReasonCertificatePending, authv1beta1.ReasonCordonedNoCertificate, authv1beta1.ReasonDrainedNoCertificate,
		authv1beta1.ReasonApprovalPending, authv1beta1.ReasonApprovalDenied:
		return true
	}
	return false
}

// decided is what one reconcile did that the metrics count once the status that says it
// is saved: what the status alone cannot tell, as a status writer may rewrite it.
type decided struct {
	// accepted is set when a handshake was accepted with its nonce newly consumed.
	accepted bool
	// certificate is the outcome of a certificate issued now (metrics.OutcomeIssued or
	// OutcomeRenewed), "" when none was.
	certificate string
	// afterSave is an error returned once the status is saved: what failed beside a
	// certificate published now (the access), for the reconcile to be tried again.
	afterSave error
}

// count counts, once the status that says it is saved, a handshake decided (an acceptance
// d says is new, or a refusal with a new reason) and a certificate issued or failed. A
// sealed acceptance that holds again after a refusal, or the same handshake sealed again
// after a status writer wiped or forged the seal, is no new handshake
// (TestAttack5StatusWriterInflatesHandshakeMetric); a certificate put back from the tenant
// record is none issued.
func (r *Reconciler) count(before, after *authv1beta1.TenantStatus, d decided) {
	was := meta.FindStatusCondition(before.Conditions, authv1beta1.ConditionAuthenticated)
	if c := meta.FindStatusCondition(after.Conditions, authv1beta1.ConditionAuthenticated); c != nil &&
		(was == nil || was.Status != c.Status || was.Reason != c.Reason) {
		if c.Status != metav1.ConditionTrue || d.accepted {
			r.Metrics.Handshake(c.Status == metav1.ConditionTrue, c.Reason)
		}
	}
	if d.certificate != "" {
		r.Metrics.Certificate(metrics.KindControlPlane, d.certificate)
	}
	if c := meta.FindStatusCondition(after.Conditions, authv1beta1.ConditionCertificateIssued); c != nil && c.Status != metav1.ConditionTrue && !notAFailure(c.Reason) {
		if was := meta.FindStatusCondition(before.Conditions, authv1beta1.ConditionCertificateIssued); was == nil || was.Reason != c.Reason {
			r.Metrics.Certificate(metrics.KindControlPlane, metrics.OutcomeFailed)
		}
	}
}

func (r *Reconciler) setReady(t *authv1beta1.Tenant) {
	for _, typ := range []string{authv1beta1.ConditionAuthenticated, authv1beta1.ConditionApproved, authv1beta1.ConditionAccessGranted, authv1beta1.ConditionCertificateIssued} {
		c := meta.FindStatusCondition(t.Status.Conditions, typ)
		if c == nil && typ == authv1beta1.ConditionApproved {
			continue // approval not required, nothing decided
		}
		if c == nil {
			status.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, false, authv1beta1.ReasonPending, "waiting for "+typ, t.Generation)
			return
		}
		if c.Status != metav1.ConditionTrue {
			status.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, false, c.Reason, c.Message, t.Generation)
			return
		}
	}
	status.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, true, authv1beta1.ReasonReady, "the consumer holds a valid certificate and its access", t.Generation)
}

// addFinalizer gives the accepted Tenant t the finalizer by a patch of a copy of its
// metadata (t carries the status being computed, which the patch's answer would wipe),
// then t takes the finalizers and resourceVersion the patch answered, so that its status
// update follows it. The patch carries t's resourceVersion: it lands only on the Tenant
// this reconcile decided on, not on one made again under its name since, nor over
// finalizers changed since (a merge patch replaces the whole list)
// (TestAttack48TenantRecreatedUnderThePatch).
func (r *Reconciler) addFinalizer(ctx context.Context, t *authv1beta1.Tenant) error {
	if controllerutil.ContainsFinalizer(t, wire.TenantFinalizer) {
		return nil
	}
	cp := &authv1beta1.Tenant{TypeMeta: t.TypeMeta, ObjectMeta: *t.ObjectMeta.DeepCopy()}
	patch := client.MergeFromWithOptions(cp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(cp, wire.TenantFinalizer)
	if err := r.Client.Patch(ctx, cp, patch); err != nil {
		return err
	}
	t.Finalizers, t.ResourceVersion = cp.Finalizers, cp.ResourceVersion
	return nil
}

// finalize removes everything the Tenant caused, and only that, then lets it go: the
// bindings it controls and the CertificateSigningRequests this manager made for it. The
// nonce is kept, consumed: a Liqo consumer re-running its handshake after Liqo's
// unauthenticate (which deletes only the Tenant) presents it again; liqoctl unauthenticate
// deletes it.
//
// It runs for every Tenant being deleted, the manager's finalizer on it or not: a peering
// user may take it off and keep one of its own (TestAttack48PeeringUserSwapsTheFinalizer);
// without the finalizer it reads the cache, so the reconciles a peering user's writes bring
// ask the API server nothing (ownedrbac.Finalize).
//
// A Tenant gone takes its consumer's slices with it: the copies given to that consumer in
// the namespace (recorded as the tenant namespace of the cluster the Tenant is named
// after, whatever its labels and spec say) are deleted, each copy's finalize removes its
// grant, and, with the manager's finalizer, the Tenant is let go only once none is left
// with this project's finalizer. Before, a slice whose consumer gave up on it (its proof
// failed, its local slice relabelled or gone) kept its grant with no Tenant left to drain
// it (helper-37's F1 on 0301c3f). The Tenant's own bindings go first, so that its
// consumer's controllers no longer write a copy back meanwhile.
func (r *Reconciler) finalize(ctx context.Context, t *authv1beta1.Tenant) (ctrl.Result, error) {
	objs := access.AccessObjects(t.Namespace, string(t.Spec.ClusterID), nil)
	ours := controllerutil.ContainsFinalizer(t, wire.TenantFinalizer)
	var reader client.Reader = r.Client
	if ours {
		if err := ownedrbac.DeleteControlled(ctx, r.Client, r.APIReader, t, objs); err != nil {
			return ctrl.Result{}, err
		}
		reader = r.APIReader
	}
	left, err := r.deleteSliceCopies(ctx, reader, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ours && left > 0 {
		return ctrl.Result{RequeueAfter: sliceCopiesGonePoll}, nil
	}
	return ctrl.Result{}, ownedrbac.Finalize(ctx, r.Client, r.APIReader, r.issuer(), t, wire.TenantFinalizer, objs)
}

// sliceCopiesGonePoll is how often a Tenant being deleted looks again for its consumer's
// slice copies still being finalized.
const sliceCopiesGonePoll = 100 * time.Millisecond

// deleteSliceCopies deletes the slices of consumer t is named after in t's namespace, when
// that is the consumer's recorded tenant namespace (givenTo), listed through reader; left
// counts those made before t's deletion still there with the provider slice controller's
// finalizer (their grant not yet removed: a copy made since is deleted, not waited for, so
// that nobody holds the Tenant by making copies).
func (r *Reconciler) deleteSliceCopies(ctx context.Context, reader client.Reader, t *authv1beta1.Tenant) (left int, err error) {
	copies, err := r.givenTo(ctx, reader, t.Namespace, t.Name)
	if err != nil {
		return 0, err
	}
	for _, rs := range copies {
		if err := r.deleteCopy(ctx, rs); err != nil {
			return 0, err
		}
		if controllerutil.ContainsFinalizer(rs, wire.ProviderSliceFinalizer) && (t.DeletionTimestamp == nil || !t.DeletionTimestamp.Before(&rs.CreationTimestamp)) {
			left++
		}
	}
	return left, nil
}

// deleteCopiesOfGone deletes the slices given to consumer key.Name in namespace
// key.Namespace once its Tenant is gone: one deleted with no finalizer left on it (a
// peering user may strip the manager's) was never finalized. The cache may not hold a
// Tenant made a moment ago: a live read confirms it is gone, only when there is a slice
// to delete.
func (r *Reconciler) deleteCopiesOfGone(ctx context.Context, key types.NamespacedName) error {
	copies, err := r.givenTo(ctx, r.Client, key.Namespace, key.Name)
	if err != nil || len(copies) == 0 {
		return err
	}
	if err := r.APIReader.Get(ctx, key, &authv1beta1.Tenant{}); !apierrors.IsNotFound(err) {
		return err
	}
	for _, rs := range copies {
		if err := r.deleteCopy(ctx, rs); err != nil {
			return err
		}
	}
	return nil
}

// givenTo lists through reader the slices given to consumer in ns, when ns is its
// recorded tenant namespace (none otherwise): every slice there but this cluster's own
// requests of that consumer (a two-way peering; consumerslice.IsRequest, not marked as a
// copy). A copy the tenant renamed to another consumer, or unmarked, is still given to
// it: misplaced, it is denied, and a denial takes nothing back (helper-38's F1); an
// unmarked copy is no longer granted (providerslice), and deleting it costs nothing.
func (r *Reconciler) givenTo(ctx context.Context, reader client.Reader, ns, consumer string) ([]*authv1beta1.ResourceSlice, error) {
	var list authv1beta1.ResourceSliceList
	if err := reader.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []*authv1beta1.ResourceSlice
	for i := range list.Items {
		rs := &list.Items[i]
		if rs.Labels[wire.ReplicationRequestedLabel] == "true" && rs.Labels[wire.ReplicationStatusLabel] != "true" {
			continue
		}
		out = append(out, rs)
	}
	if len(out) == 0 {
		// The placement is looked up only for slices to delete: the reconciles of a
		// Tenant not made yet (a handshake's nonce, its namespace) ask nothing more.
		return nil, nil
	}
	if ok, _, err := r.Placement.Verify(ctx, ns, consumer); err != nil || !ok {
		return nil, err
	}
	return out, nil
}

// deleteCopy deletes rs (this UID) unless it is being deleted already.
func (r *Reconciler) deleteCopy(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	if rs.DeletionTimestamp != nil {
		return nil
	}
	if err := r.Client.Delete(ctx, rs, client.Preconditions{UID: &rs.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting ResourceSlice %s of the consumer whose Tenant is deleted: %w", rs.Name, err)
	}
	return nil
}
