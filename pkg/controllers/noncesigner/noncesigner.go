// Package noncesigner is the consumer controller that signs liqo-signed-nonce Secrets
// with the cluster's current key (read at each nonce: a rotation switches it). It signs
// only canonical nonces, and only in the tenant namespace of the remote cluster the Secret
// is labelled with: it is not an oracle.
package noncesigner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler signs nonces.
type Reconciler struct {
	Client    client.Client
	Placement placement.Placement
	Recorder  events.EventRecorder
	// Keys are this cluster's keys as they are now: nonces are signed with the current one.
	Keys cluster.KeySource
}

// SetupWithManager registers the reconciler for Secrets labelled liqo.io/signed-nonce=true.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := wiring.NewController(mgr, "noncesigner", access.Consumer).
		For(&corev1.Secret{}, wiring.HasLabel(wire.SignedNonceLabel, "true"))
	return b.WatchTenantNamespaces(wiring.Fixed(wire.SignedNonceSecretName)).Complete(r)
}

// Reconcile signs the nonce of one Secret, or re-signs it when the signature present
// does not verify (the nonce was replaced).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, remote, err := placement.PlacedSecret(ctx, r.Client, r.Placement, r.Recorder, req.NamespacedName, wire.SignedNonceSecretName, "SignedNonceOutsideTenantNamespace", "SignNonce")
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	nonce := string(s.Data[wire.NonceField])
	if len(nonce) == 0 {
		return ctrl.Result{}, nil
	}
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sig := s.Data[wire.SignedNonceField]; len(sig) > 0 && authn.VerifyNonceSignature(ks.Current.Public(), nonce, sig) == nil {
		return ctrl.Result{}, nil
	}
	sig, err := authn.SignNonce(ks.Current, nonce)
	if err != nil {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, string(authn.ReasonOf(err)), "SignNonce", "not signing: %v", err)
		return ctrl.Result{}, nil
	}
	orig := s.DeepCopy()
	s.Data[wire.SignedNonceField] = sig
	// A patch of the signature alone (the cache may hold the Secret without others'
	// annotations), with the resourceVersion read.
	if err := r.Client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		// A conflict: the Secret changed since it was read; its event brings it back.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, authv1beta1.ReasonNonceSigned, "SignNonce", "nonce of cluster %q signed", remote)
	return ctrl.Result{}, nil
}
