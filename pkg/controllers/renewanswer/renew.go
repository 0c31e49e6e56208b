// Package renewanswer is the provider side of Liqo's Renew channel. A Liqo consumer (and this
// project's consumer when it may not read its Tenant) keeps a Renew in its tenant
// namespace on the provider; this controller answers it with the current authentication
// parameters of the consumer's accepted Tenant, which the tenant controller renews at two
// thirds of their lifetime.
//
// Who writes what it reads: the Renew is written by the tenant itself (its control-plane
// identity may create and update Renews in its tenant namespace), by anyone allowed to
// write Renews there, and by the provider's administrator; its status may be written by
// anyone allowed renews/status. So nothing in a Renew is trusted: the namespace must be
// the tenant namespace of spec.consumerClusterID by this cluster's own record, the Tenant
// must carry an acceptance sealed by this provider, and a public key or CSR the Renew
// carries (older Liqo consumers send them) must be the accepted key and a CSR that passes
// every rule for it. The answer is only ever the Tenant's own certificate, for the key the
// provider accepted: no CSR is signed from a Renew, and nothing is granted. The Renew
// named wire.KeyRotationRenewName is no renewal: the keyrotation controller answers it.
package renewanswer

import (
	"bytes"
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler answers Renews with the Tenant's current authentication parameters.
type Reconciler struct {
	Client    client.Client
	Placement placement.Placement
	Recorder  events.EventRecorder
	// Keys are this cluster's keys: acceptances are sealed with one of them.
	Keys cluster.KeySource
	// ClusterID is this provider's: a consumer names its Renew after its Identity,
	// controlplane-<provider ID>.
	ClusterID string
}

// SetupWithManager registers the reconciler: Renews, and the Tenants they answer from.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := wiring.NewController(mgr, "renewanswer", access.Provider).
		For(&authv1beta1.Renew{}).
		Watches(&authv1beta1.Tenant{}, handler.EnqueueRequestsFromMapFunc(wiring.InNamespaceOf(mgr.GetClient(), func() *authv1beta1.RenewList { return &authv1beta1.RenewList{} }, nil)),
			wiring.AfterStart())
	return b.WatchTenantNamespaces(wiring.Fixed(wire.IdentityName(r.ClusterID))).Complete(r)
}

// Reconcile answers one Renew.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name == wire.KeyRotationRenewName {
		return ctrl.Result{}, nil // not a renewal: the keyrotation controller's
	}
	rn := &authv1beta1.Renew{}
	if err := r.Client.Get(ctx, req.NamespacedName, rn); err != nil || rn.DeletionTimestamp != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ap, reason, msg, err := r.answer(ctx, rn)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ap == nil {
		r.Recorder.Eventf(rn, nil, corev1.EventTypeWarning, reason, "AnswerRenew", "%s", msg)
		return ctrl.Result{}, nil
	}
	if reflect.DeepEqual(rn.Status.AuthParams, ap) {
		return ctrl.Result{}, nil
	}
	rn.Status.AuthParams = ap
	if err := r.Client.Status().Update(ctx, rn); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(rn, nil, corev1.EventTypeNormal, authv1beta1.ReasonRenewAnswered, "AnswerRenew", "published the current certificate of Tenant %s/%s", rn.Namespace, rn.Spec.ConsumerClusterID)
	return ctrl.Result{}, nil
}

// answer is the authentication parameters a Renew gets, or why it gets none.
func (r *Reconciler) answer(ctx context.Context, rn *authv1beta1.Renew) (*authv1beta1.AuthParams, string, string, error) {
	id := string(rn.Spec.ConsumerClusterID)
	ok, why, err := r.Placement.Verify(ctx, rn.Namespace, id)
	if err != nil {
		return nil, "", "", err
	}
	if !ok {
		return nil, authv1beta1.ReasonRenewMisplaced, why + ": a Renew is answered only in the tenant namespace of its spec.consumerClusterID", nil
	}
	if rn.Spec.IdentityType != "" && rn.Spec.IdentityType != authv1beta1.ControlPlaneIdentityType {
		return nil, authv1beta1.ReasonRenewUnsupported, fmt.Sprintf("identityType %q: this provider renews only ControlPlane identities through a Renew", rn.Spec.IdentityType), nil
	}
	t := &authv1beta1.Tenant{}
	if getErr := r.Client.Get(ctx, client.ObjectKey{Namespace: rn.Namespace, Name: id}, t); getErr != nil {
		return nil, authv1beta1.ReasonRenewNoTenant, fmt.Sprintf("no Tenant %s/%s: %v", rn.Namespace, id, getErr), client.IgnoreNotFound(getErr)
	}
	keys, err := r.Keys.Keys(ctx)
	if err != nil {
		return nil, "", "", err
	}
	if t.Status.AcceptedKeyFingerprint == "" || acceptance.VerifySealedKeys(t, keys) != nil {
		return nil, authv1beta1.ReasonRenewNoTenant, fmt.Sprintf("Tenant %s/%s is not accepted by this provider", t.Namespace, t.Name), nil //nolint:nilerr // an unsealed Tenant is answered with the reason, not retried
	}
	state, err := placement.TenantState(ctx, r.Client, r.Placement.LiqoNamespace, t)
	if err != nil {
		return nil, "", "", err
	}
	if state == authv1beta1.TenantConditionDrained {
		return nil, authv1beta1.ReasonRenewNoTenant, fmt.Sprintf("Tenant %s/%s is Drained: it gets no certificate", t.Namespace, t.Name), nil
	}
	if !t.Status.AuthParams.HasCertificate() {
		return nil, authv1beta1.ReasonRenewNoTenant, fmt.Sprintf("Tenant %s/%s holds no certificate yet", t.Namespace, t.Name), nil
	}
	if msg := checkKey(rn, t); msg != "" {
		return nil, authv1beta1.ReasonRenewKeyMismatch, msg, nil
	}
	return t.Status.AuthParams.DeepCopy(), "", "", nil
}

// checkKey refuses a Renew whose public key or CSR is not the Tenant's accepted key (and
// a CSR that does not pass every rule): its answer would not be for the key that asks.
func checkKey(rn *authv1beta1.Renew, t *authv1beta1.Tenant) string {
	if len(rn.Spec.PublicKey) > 0 {
		pub, err := authn.ParsePublicKey(rn.Spec.PublicKey)
		if err != nil {
			return fmt.Sprintf("spec.publicKey: %v", err)
		}
		fp, err := authn.Fingerprint(pub)
		if err != nil || fp != t.Status.AcceptedKeyFingerprint {
			return fmt.Sprintf("spec.publicKey is not the key %s this provider accepted for %q: authenticate again to change keys", t.Status.AcceptedKeyFingerprint, t.Name)
		}
	}
	if len(rn.Spec.CSR) > 0 {
		if len(rn.Spec.CSR) > authn.MaxCSRSize {
			return fmt.Sprintf("spec.csr is %d bytes, more than the %d allowed", len(rn.Spec.CSR), authn.MaxCSRSize)
		}
		pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
		if err != nil {
			return err.Error()
		}
		if _, err := authn.ValidateCSR(rn.Spec.CSR, pub, t.Name); err != nil && !bytes.Equal(rn.Spec.CSR, t.Spec.CSR) {
			return fmt.Sprintf("spec.csr is not a valid request of the accepted key for %q: %v", t.Name, err)
		}
	}
	return ""
}
