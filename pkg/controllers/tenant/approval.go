package tenant

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
)

// The approval of new consumers. When the provider's administrator requires it
// (liqo-auth-config, liqoctl install --require-approval), a Tenant that passes
// authentication is sealed as always, but gets no certificate and no access until the
// administrator approved the key its acceptance sealed (liqoctl approve tenant). The
// decision is read from the tenant record, which no tenant and no status writer may write,
// for the sealed key only (status.acceptedKeyFingerprint counts only once the seal
// verified): a status writer who sets the Approved condition True changes nothing, and a
// Tenant re-created with another key under the same cluster ID waits again. A denial
// (liqoctl deny tenant) holds for its key whether approval is required or not; an
// approval given later replaces it. A Tenant that publishes a certificate this provider
// issued for its sealed key when approval becomes required counts as approved: turning
// the setting on cuts no consumer off.

// approvalVerdict is what the approval decision came to for one Tenant.
type approvalVerdict struct {
	// relevant is false when approval is not required and nothing was decided about the
	// key: the Tenant has no Approved condition.
	relevant bool
	// approved is the status of the Approved condition.
	approved bool
	// reason and message are those of the Approved condition.
	reason, message string
}

// pending says the sealed key waits for the administrator.
func (v approvalVerdict) pending() bool {
	return v.relevant && v.reason == authv1beta1.ReasonApprovalPending
}

// denied says the administrator denied the sealed key.
func (v approvalVerdict) denied() bool {
	return v.relevant && v.reason == authv1beta1.ReasonApprovalDenied
}

// approvalFacts is what the approval decision reads.
type approvalFacts struct {
	// required is the setting of liqo-auth-config.
	required bool
	// decision is the record's decision about the sealed key (nil: none).
	decision *cluster.Approval
	// fingerprint is the sealed key's, clusterID the consumer's.
	fingerprint, clusterID string
	// holds says the Tenant publishes a certificate this provider issued for the sealed
	// key (checked by checkPublished).
	holds bool
}

// decideApproval decides, in order: a decision recorded for the sealed key; no approval
// required; a certificate already held; otherwise the key waits.
func decideApproval(f approvalFacts) approvalVerdict {
	switch {
	case f.decision != nil && f.decision.Decision == cluster.Denied:
		return approvalVerdict{relevant: true, reason: authv1beta1.ReasonApprovalDenied,
			message: fmt.Sprintf("the provider's administrator denied cluster %q (key %s) at %s: %s", f.clusterID, f.decision.KeyFingerprint, f.decision.At.UTC().Format(time.RFC3339), f.decision.Reason)}
	case f.decision != nil && f.decision.Decision == cluster.Approved:
		return approvalVerdict{relevant: true, approved: true, reason: authv1beta1.ReasonApproved,
			message: fmt.Sprintf("the provider's administrator approved key %s of cluster %q at %s", f.fingerprint, f.clusterID, f.decision.At.UTC().Format(time.RFC3339))}
	case !f.required:
		return approvalVerdict{}
	case f.holds:
		return approvalVerdict{relevant: true, approved: true, reason: authv1beta1.ReasonApprovedHoldingCertificate,
			message: fmt.Sprintf("key %s already held a certificate of this provider when approval became required: it counts as approved", f.fingerprint)}
	}
	return approvalVerdict{relevant: true, reason: authv1beta1.ReasonApprovalPending, message: pendingMessage(f.fingerprint, f.clusterID)}
}

// pendingMessage says what a key waits for, and what its approval takes.
func pendingMessage(fp, clusterID string) string {
	return fmt.Sprintf("key %s of cluster %q waits for the provider's administrator to approve it: liqoctl approve tenant %s (or liqoctl deny tenant %s --reason ...)", fp, clusterID, clusterID, clusterID)
}

// approval gathers the approval facts of the accepted Tenant t, whose status checkPublished
// verified, and decides; rec is the tenant record (nil: none).
func (r *Reconciler) approval(ctx context.Context, t *authv1beta1.Tenant, rec *cluster.TenantRecord) (approvalVerdict, error) {
	// Read from the cache, which holds this project's ConfigMaps of the Liqo namespace: no
	// request to the API server.
	cfg, err := cluster.GetConfig(ctx, r.Client, r.Placement.LiqoNamespace)
	if err != nil {
		return approvalVerdict{}, err
	}
	fp := t.Status.AcceptedKeyFingerprint
	decision := rec.ApprovalOf(fp)
	if rot := rec.RotationTo(string(t.UID), fp); decision == nil && rot != nil {
		// The holder of the approved key proved it holds the new one: the approval moves
		// with it (a denial covers the cluster already).
		decision = rec.ApprovalOf(rot.From)
	}
	return decideApproval(approvalFacts{required: cfg.RequireApproval, decision: decision, fingerprint: fp, clusterID: string(t.Spec.ClusterID),
		holds: t.Status.AuthParams.HasCertificate() && t.Status.Certificate != nil}), nil
}

// setApproved sets the Approved condition v says (removes it when v is not relevant), with
// a Normal Event when it changed; a denial's Warning is the CertificateIssued refusal's.
func (r *Reconciler) setApproved(t *authv1beta1.Tenant, v approvalVerdict) {
	if !v.relevant {
		meta.RemoveStatusCondition(&t.Status.Conditions, authv1beta1.ConditionApproved)
		return
	}
	if status.SetCondition(&t.Status.Conditions, authv1beta1.ConditionApproved, v.approved, v.reason, v.message, t.Generation) && !v.denied() {
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, v.reason, authv1beta1.ConditionApproved, "%s", v.message)
	}
}

// everyTenantOn maps a change of the object named name in the Liqo namespace to every
// Tenant: liqo-auth-config (whether approval is required decides each Tenant that has no
// certificate yet) and this cluster's keys Secret (a switch of the provider's key has each
// acceptance sealed again with the new current key).
func (r *Reconciler) everyTenantOn(name string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetName() != name || o.GetNamespace() != r.Placement.LiqoNamespace {
			return nil
		}
		var list authv1beta1.TenantList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
}
