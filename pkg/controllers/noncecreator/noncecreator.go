// Package noncecreator is the provider controller that fills empty liqo-nonce Secrets
// with a fresh nonce and records when it was issued. It never refills a nonce.
package noncecreator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler fills nonce Secrets.
type Reconciler struct {
	Client    client.Client
	Placement placement.Placement
	Recorder  events.EventRecorder
	// NonceTTL is how long a nonce may be used after its Secret was created: an empty
	// Secret older than that is not filled, its nonce would be born expired.
	NonceTTL time.Duration
	Now      func() time.Time
}

// SetupWithManager registers the reconciler for Secrets labelled liqo.io/nonce=true.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := wiring.NewController(mgr, "noncecreator", access.Provider).
		For(&corev1.Secret{}, wiring.HasLabel(wire.NonceLabel, "true"))
	return b.WatchTenantNamespaces(wiring.Fixed(wire.NonceSecretName)).Complete(r)
}

// Reconcile fills the nonce of one Secret if it is empty and sits in the right place.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, remote, err := placement.PlacedSecret(ctx, r.Client, r.Placement, r.Recorder, req.NamespacedName, wire.NonceSecretName, "NonceOutsideTenantNamespace", "FillNonce")
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	orig := s.DeepCopy()
	if len(s.Data[wire.NonceField]) > 0 {
		if s.Annotations[wire.NonceIssuedAtAnnotation] != "" {
			return ctrl.Result{}, nil
		}
		// Filled by someone else (e.g. a CLI) without the issue time: record its creation.
		return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(r.stamp(ctx, orig, s, s.CreationTimestamp.Time)))
	}
	now := r.Now()
	if age := now.Sub(s.CreationTimestamp.Time); r.NonceTTL > 0 && age >= r.NonceTTL {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, authv1beta1.ReasonNonceSecretTooOld, "FillNonce",
			"not filled: the Secret was created %s ago and a nonce expires %s after its Secret was created; delete it and create a new nonce (liqoctl create nonce)", age.Round(time.Second), r.NonceTTL)
		return ctrl.Result{}, nil
	}
	nonce, err := authn.NewNonce()
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[wire.NonceField] = []byte(nonce)
	if err := r.stamp(ctx, orig, s, now); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(ignoreConflict(err))
	}
	r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, authv1beta1.ReasonNonceGenerated, "FillNonce", "nonce generated for cluster %q", remote)
	return ctrl.Result{}, nil
}

// stamp writes the Secret, as changed from orig, with its issue time: a patch of what
// changed (the cache may hold the Secret without the annotations of others), carrying the
// resourceVersion read, so two fillers never both succeed: the loser gets a conflict and
// sees the nonce.
// The stamp is informative: expiry is measured from the Secret's creation, which only the
// API server writes.
func (r *Reconciler) stamp(ctx context.Context, orig, s *corev1.Secret, at time.Time) error {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[wire.NonceIssuedAtAnnotation] = at.UTC().Format(time.RFC3339)
	return r.Client.Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
