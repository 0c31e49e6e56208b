package handshake

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ErrApprovalPending means the provider requires its administrator's approval of new
// consumers and has not approved this one yet: the handshake is accepted and resumes,
// with the same key, once they run liqoctl approve tenant. Returned by a wait that does
// not wait for the approval (Pair.WaitForApproval false).
var ErrApprovalPending = errors.New("the provider's administrator has not approved this cluster yet")

// ErrDenied means the provider's administrator denied this cluster's key (liqoctl deny
// tenant): no certificate is issued for it. The error carries their reason.
var ErrDenied = errors.New("the provider's administrator denied this cluster")

// approvalWaitKey carries, in the context of a wait for the provider's answer, whether it
// waits for the administrator's approval (Pair.WaitForApproval).
type approvalWaitKey struct{}

// approvalWait is how a wait for the provider's answer treats a key that waits for
// approval: wait (the CLI), saying so once, or return ErrApprovalPending at once.
type approvalWait struct {
	wait bool
	said bool
}

// withApprovalWait is ctx for a wait that waits for the approval, or not.
func withApprovalWait(ctx context.Context, wait bool) context.Context {
	return context.WithValue(ctx, approvalWaitKey{}, wait)
}

// approvalWaitOf is how the wait in ctx treats a pending approval: without a word of the
// Pair (WaitTenant called alone, by a command), it waits.
func approvalWaitOf(ctx context.Context) *approvalWait {
	wait, ok := ctx.Value(approvalWaitKey{}).(bool)
	return &approvalWait{wait: wait || !ok}
}

// approvalOf is the Approved condition of t when it speaks of t's current spec (nil: none,
// or older than the spec).
func approvalOf(t *authv1beta1.Tenant) *metav1.Condition {
	c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionApproved)
	if c == nil || c.ObservedGeneration != t.Generation || t.Status.ObservedGeneration < t.Generation {
		return nil
	}
	return c
}

// awaitsApproval says whether the provider's answer to t waits for its administrator.
func awaitsApproval(t *authv1beta1.Tenant) bool {
	c := approvalOf(t)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == authv1beta1.ReasonApprovalPending
}

// check looks at the Tenant t on provider p for the administrator's decision: a key that
// waits (waiting set: the wait goes on, with state in words), or a denial (an error that
// wraps ErrDenied, with their reason). A denial counts only when the provider's record,
// which no status writer may write, says it too (when these credentials may read it): a
// status writer cannot end the consumer's wait with a forged denial.
func (a *approvalWait) check(ctx context.Context, p *Side, t *authv1beta1.Tenant) (waiting bool, state string, err error) {
	c := approvalOf(t)
	if c == nil || c.Status == metav1.ConditionTrue {
		return false, "", nil
	}
	id := string(t.Spec.ClusterID)
	switch c.Reason {
	case authv1beta1.ReasonApprovalPending:
		state = fmt.Sprintf("waiting for the provider's administrator to approve cluster %q (liqoctl approve tenant %s)", id, id)
		if !a.wait {
			return true, state, fmt.Errorf("%w: cluster %q waits for its administrator to run liqoctl approve tenant %s; the handshake resumes, with the same key, once they did",
				ErrApprovalPending, id, id)
		}
		if !a.said {
			a.said = true
			p.Report.Info("Waiting for the provider's administrator to approve cluster %q (they run: liqoctl approve tenant %s)", id, id)
		}
		return true, state, nil
	case authv1beta1.ReasonApprovalDenied:
		return a.denied(ctx, p, t, c)
	}
	return false, "", nil
}

// denied is check of a Tenant whose status says its key was denied.
func (a *approvalWait) denied(ctx context.Context, p *Side, t *authv1beta1.Tenant, c *metav1.Condition) (bool, string, error) {
	id := string(t.Spec.ClusterID)
	rec, err := p.Controllers().Record(ctx, p, id)
	if err != nil {
		return true, "", err
	}
	why := c.Message
	if rec != nil {
		d := rec.ApprovalOf(t.Status.AcceptedKeyFingerprint)
		if d == nil || d.Decision != cluster.Denied {
			return true, "the Tenant's status says its key was denied, the provider's record does not: waiting for the provider's answer", nil
		}
		why = fmt.Sprintf("%q, at %s", d.Reason, d.At.UTC().Format(time.RFC3339))
	}
	return true, "", fmt.Errorf("%w: cluster %q (key %s): %s; ask them, then run liqoctl authenticate again once they run liqoctl approve tenant %s",
		ErrDenied, id, t.Status.AcceptedKeyFingerprint, authv1beta1.EscapeText(why), id)
}

// SealedKey is the fingerprint of the consumer key whose handshake the provider with
// cluster key providerKey sealed in Tenant t, checked over t's spec as it is now: what its
// administrator approves or denies. A status alone (which status writers may write) names
// no key; a spec changed since the seal names none either.
func SealedKey(t *authv1beta1.Tenant, providerKey crypto.PublicKey) (string, error) {
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return "", err
	}
	fp, err := authn.Fingerprint(pub)
	if err != nil {
		return "", err
	}
	if t.Status.AcceptedKeyFingerprint != fp {
		return "", fmt.Errorf("the provider accepted no handshake of the key the Tenant presents (%s)", fp)
	}
	acc := authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID), KeyFingerprint: fp, CSRDigest: authn.CSRDigest(t.Spec.CSR)}
	if err := authn.VerifyAcceptanceSeal(providerKey, acc, t.Status.AcceptanceSeal); err != nil {
		return "", fmt.Errorf("the acceptance of key %s is not sealed by this provider: %w", fp, err)
	}
	return fp, nil
}

// WaitDecisionApplied waits on provider s until its controllers applied the
// administrator's decision (cluster.Approved or cluster.Denied) about the key with
// fingerprint fp to the Tenant at key: its Approved condition says it, for its current
// spec, and an approved Tenant's certificate is no longer pending. It returns the Tenant
// as it saw it then.
func WaitDecisionApplied(ctx context.Context, s *Side, key client.ObjectKey, fp, decision string) (*authv1beta1.Tenant, error) {
	want := authv1beta1.ReasonApproved
	if decision == cluster.Denied {
		want = authv1beta1.ReasonApprovalDenied
	}
	return waitObject(ctx, s, key, nil, &authv1beta1.TenantList{}, "the provider's controllers to apply the decision", "waiting for the Tenant status",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			if t.Status.AcceptedKeyFingerprint != fp {
				return false, "", fmt.Errorf("the Tenant now presents another key than %s: decide again about the new one", fp)
			}
			c := approvalOf(t)
			if c == nil || c.Reason != want {
				return false, "the Tenant's Approved condition does not say " + want + " yet", nil
			}
			if issued := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionCertificateIssued); decision == cluster.Approved &&
				(issued == nil || issued.Status != metav1.ConditionTrue && issued.Reason == authv1beta1.ReasonCertificatePending) {
				return false, "the certificate is pending", nil
			}
			return true, "", nil
		})
}
