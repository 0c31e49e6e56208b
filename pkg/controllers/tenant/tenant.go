// Package tenant is the provider controller of Tenants. It verifies a consumer's
// handshake exactly once, consumes the nonce, has the consumer's CSR signed by the
// cluster's client signer, binds the control-plane role in the tenant namespace, renews
// the certificate before it expires, and follows the administrative state
// (Active, Cordoned, Drained). A finalizer removes everything a Tenant caused.
package tenant

import (
	"context"
	"fmt"
	"strings"
	"time"

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

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/common"
)

// Options configure the provider side of the handshake.
type Options struct {
	// APIServer is the provider API server URL handed to consumers.
	APIServer string
	// CA is the PEM CA bundle for APIServer.
	CA []byte
	// NonceTTL is how long a nonce may be used after it was issued.
	NonceTTL time.Duration
	// CertificateLifetime is the expirationSeconds asked for each certificate.
	CertificateLifetime time.Duration
	// CSRTimeout is how long an approved CSR may wait for its certificate before the
	// Tenant reports "approved but not issued".
	CSRTimeout time.Duration
	// RenewBefore, when set, renews a certificate when less than this remains; otherwise
	// a certificate is renewed after two thirds of its lifetime.
	RenewBefore time.Duration
}

// Reconciler reconciles Tenants.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Options   Options
	Now       func() time.Time
}

// SetupWithManager registers the reconciler: Tenants, their bindings, their CSRs, and
// the nonce Secrets they wait for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).Named("tenant").
		WatchesRawSource(common.For(mgr, &authv1beta1.Tenant{})).
		WatchesRawSource(common.Owns(mgr, &rbacv1.RoleBinding{}, &authv1beta1.Tenant{})).
		WatchesRawSource(common.Owns(mgr, &rbacv1.Role{}, &authv1beta1.Tenant{})).
		WatchesRawSource(common.Watch(mgr.GetCache(), &certificatesv1.CertificateSigningRequest{}, handler.EnqueueRequestsFromMapFunc(csrToTenant),
			common.HasLabel(cluster.ManagedByLabel, cluster.ManagedByValue))).
		WatchesRawSource(common.Watch(mgr.GetCache(), &corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.nonceToTenants),
			common.HasLabel(cluster.NonceLabel, "true"))).
		Complete(r)
}

func csrToTenant(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[TenantAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

func (r *Reconciler) nonceToTenants(ctx context.Context, o client.Object) []reconcile.Request {
	var list authv1beta1.TenantList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// Reconcile drives one Tenant towards its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &authv1beta1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, t)
	}
	if !controllerutil.ContainsFinalizer(t, cluster.TenantFinalizer) {
		patch := client.MergeFrom(t.DeepCopy())
		controllerutil.AddFinalizer(t, cluster.TenantFinalizer)
		if err := r.Client.Patch(ctx, t, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := t.Status.DeepCopy()
	res, err := r.reconcile(ctx, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	t.Status.ObservedGeneration = t.Generation
	if !equality.Semantic.DeepEqual(before, &t.Status) {
		if err := r.Client.Status().Update(ctx, t); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
	}
	return res, r.afterStatus(ctx, t)
}

// reconcile computes the Tenant status; only what it writes outside the Tenant happens
// here, before the status is saved.
func (r *Reconciler) reconcile(ctx context.Context, t *authv1beta1.Tenant) (ctrl.Result, error) {
	now := r.Now()
	if err := checkPlacement(ctx, r.Client, t); err != nil {
		return ctrl.Result{}, r.refuse(t, err)
	}
	if t.Status.AcceptedKeyFingerprint == "" || handshakeChanged(t) {
		acc, err := verifyHandshake(ctx, r.Client, t, r.Options.NonceTTL, now)
		if err != nil {
			if t.Status.AcceptedKeyFingerprint != "" {
				err = refusal(ReasonHandshakeChanged, "spec.publicKey or spec.csr changed after the handshake was accepted, and the new handshake is refused: %v", err)
			}
			return ctrl.Result{}, r.refuse(t, err)
		}
		r.accept(t, acc, now)
	}
	t.Status.TenantNamespace = t.Namespace
	res := ctrl.Result{}
	state := t.Spec.TenantCondition
	switch state {
	case authv1beta1.TenantConditionDrained:
		still, err := r.revokeAccess(ctx, t)
		if err != nil {
			return res, err
		}
		if still != "" {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, true, ReasonAccessStillAllowed, "the tenant is Drained, but SubjectAccessReviews still allow: "+still, corev1.EventTypeWarning)
		} else {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, false, ReasonAccessRevoked, "the tenant is Drained: its bindings were removed and SubjectAccessReviews confirm every permission is denied", corev1.EventTypeNormal)
		}
	default:
		cordoned := state == authv1beta1.TenantConditionCordoned
		granted, err := r.ensureAccess(ctx, t, cordoned)
		if err != nil {
			return res, err
		}
		if granted {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, true, ReasonAccessGranted, fmt.Sprintf("user %q may use role %s in namespace %q", t.Spec.ClusterID, cluster.ControlPlaneRoleName, t.Namespace), corev1.EventTypeNormal)
		} else {
			r.setCondition(t, authv1beta1.ConditionAccessGranted, false, ReasonCordonedNoGrant, "the tenant is Cordoned: no new access is granted", corev1.EventTypeNormal)
		}
	}
	res, err := r.reconcileCertificate(ctx, t, state, now)
	r.setReady(t)
	return res, err
}

func (r *Reconciler) reconcileCertificate(ctx context.Context, t *authv1beta1.Tenant, state authv1beta1.TenantCondition, now time.Time) (ctrl.Result, error) {
	hasCert := t.Status.AuthParams != nil && len(t.Status.AuthParams.SignedCRT) > 0 && t.Status.Certificate != nil
	due := !hasCert || (t.Status.Certificate.RenewAfter != nil && !now.Before(t.Status.Certificate.RenewAfter.Time))
	switch {
	case state == authv1beta1.TenantConditionDrained:
		if !hasCert {
			r.setCondition(t, authv1beta1.ConditionCertificateIssued, false, ReasonDrainedNoCertificate, "the tenant is Drained: no certificate is issued", corev1.EventTypeNormal)
		}
		return ctrl.Result{}, nil
	case !hasCert && state == authv1beta1.TenantConditionCordoned:
		r.setCondition(t, authv1beta1.ConditionCertificateIssued, false, ReasonCordonedNoCertificate, "the tenant is Cordoned: no new certificate is issued", corev1.EventTypeNormal)
		return ctrl.Result{}, nil
	case !due:
		return ctrl.Result{RequeueAfter: t.Status.Certificate.RenewAfter.Sub(now)}, nil
	}
	if r.Options.APIServer == "" || len(r.Options.CA) == 0 {
		r.setCondition(t, authv1beta1.ConditionCertificateIssued, false, "APIServerUnknown",
			"the provider does not know the API server URL and CA to hand to consumers: run liqoctl install --api-server-url, or start the manager with --api-server-url", corev1.EventTypeWarning)
		return ctrl.Result{}, nil
	}
	is, err := r.ensureCertificate(ctx, t, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if is.cert == nil {
		evType := corev1.EventTypeNormal
		if is.reason != ReasonCertificatePending {
			evType = corev1.EventTypeWarning
		}
		if !hasCert {
			r.setCondition(t, authv1beta1.ConditionCertificateIssued, false, is.reason, is.message, evType)
		} else if evType == corev1.EventTypeWarning {
			r.Recorder.Eventf(t, nil, evType, is.reason, "RenewCertificate", "%s", is.message)
		}
		return ctrl.Result{RequeueAfter: is.requeueAfter}, nil
	}
	reason := ReasonCertificateIssued
	if hasCert {
		reason = ReasonCertificateRenewed
	}
	t.Status.AuthParams = &authv1beta1.AuthParams{APIServer: r.Options.APIServer, CA: r.Options.CA, SignedCRT: is.pem, ProxyURL: t.Spec.ProxyURL}
	t.Status.Certificate = r.certificateInfo(is.cert)
	r.setCondition(t, authv1beta1.ConditionCertificateIssued, true, reason,
		fmt.Sprintf("certificate %s valid until %s, renewed after %s", t.Status.Certificate.SerialNumber,
			is.cert.NotAfter.UTC().Format(time.RFC3339), t.Status.Certificate.RenewAfter.UTC().Format(time.RFC3339)), corev1.EventTypeNormal)
	return ctrl.Result{RequeueAfter: t.Status.Certificate.RenewAfter.Sub(now)}, nil
}

// afterStatus runs what must follow a saved status: a consumed nonce is deleted only once
// the acceptance is recorded, and a CSR only once its certificate is published.
func (r *Reconciler) afterStatus(ctx context.Context, t *authv1beta1.Tenant) error {
	if t.Status.AcceptedKeyFingerprint != "" {
		var s corev1.Secret
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: cluster.NonceSecretName}, &s)
		if err == nil && s.CreationTimestamp.Time.Before(t.Status.AcceptedAt.Time.Add(time.Second)) {
			if err := r.Client.Delete(ctx, &s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("consuming the nonce: %w", err)
			}
		}
	}
	if t.Status.Certificate != nil {
		// A CSR is done once its certificate is published: only the one a renewal is
		// waiting for (named after the current certificate) is kept.
		return r.deleteCSRs(ctx, t, csrName(t))
	}
	return nil
}

func (r *Reconciler) accept(t *authv1beta1.Tenant, acc *acceptance, now time.Time) {
	reissue := t.Status.AcceptedKeyFingerprint != ""
	t.Status.AcceptedKeyFingerprint = acc.fingerprint
	t.Status.AcceptedCSRDigest = acc.csrDigest
	t.Status.AcceptedAt = &metav1.Time{Time: now}
	if reissue {
		t.Status.AuthParams, t.Status.Certificate = nil, nil
	}
	r.setCondition(t, authv1beta1.ConditionAuthenticated, true, ReasonAccepted,
		fmt.Sprintf("the nonce signature and the CSR of key %s were verified; the nonce is consumed", acc.fingerprint), corev1.EventTypeNormal)
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

func (r *Reconciler) setCondition(t *authv1beta1.Tenant, typ string, ok bool, reason, msg, eventType string) {
	if common.SetCondition(&t.Status.Conditions, typ, ok, reason, msg, t.Generation) && (eventType == corev1.EventTypeWarning || ok) {
		r.Recorder.Eventf(t, nil, eventType, reason, typ, "%s", msg)
	}
}

func (r *Reconciler) setReady(t *authv1beta1.Tenant) {
	for _, typ := range []string{authv1beta1.ConditionAuthenticated, authv1beta1.ConditionAccessGranted, authv1beta1.ConditionCertificateIssued} {
		c := meta.FindStatusCondition(t.Status.Conditions, typ)
		if c == nil {
			common.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, false, "Pending", "waiting for "+typ, t.Generation)
			return
		}
		if c.Status != metav1.ConditionTrue {
			common.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, false, c.Reason, c.Message, t.Generation)
			return
		}
	}
	common.SetCondition(&t.Status.Conditions, authv1beta1.ConditionReady, true, "Ready", "the consumer holds a valid certificate and its access", t.Generation)
}

// finalize removes everything the Tenant caused, then lets it go.
func (r *Reconciler) finalize(ctx context.Context, t *authv1beta1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, cluster.TenantFinalizer) {
		return nil
	}
	for _, obj := range AccessObjects(t.Namespace, string(t.Spec.ClusterID)) {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	nonce := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: cluster.NonceSecretName}}
	if err := r.Client.Delete(ctx, nonce); client.IgnoreNotFound(err) != nil {
		return err
	}
	// DeleteAllOf is not served from the cache: it also finds a CSR created just now.
	if err := r.Client.DeleteAllOf(ctx, &certificatesv1.CertificateSigningRequest{},
		client.MatchingLabels{cluster.TenantUIDLabel: string(t.UID)}); client.IgnoreNotFound(err) != nil {
		return err
	}
	patch := client.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, cluster.TenantFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, t, patch))
}
