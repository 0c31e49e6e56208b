package tenant

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// The certificate of an accepted Tenant is decided in the manner of cert-manager's
// readiness controller: what the decision reads is gathered once (certificateFacts), an
// ordered list of pure rules decides an action (decideCertificate, then afterIssuance
// for what the signer answered), and the reconciler carries the action out
// (Reconciler.carryOut), the one place that sets the CertificateIssued condition of an
// action. The rules read nothing a tenant or a status writer could have chosen: the state
// in force is the stricter of the spec and the record, the certificate is the one
// checkPublished verified this provider published (its description read from the
// certificate itself), and the serial to renew ahead of time is the record's.

// certVerb is what the reconciler does about a Tenant's certificate.
type certVerb int

const (
	// certNothing changes nothing and asks for no requeue.
	certNothing certVerb = iota
	// certWait changes nothing and comes back after requeueAfter.
	certWait
	// certRefuse sets CertificateIssued False for reason, with message, and records an
	// Event of eventType when the condition changed.
	certRefuse
	// certIssue has a first certificate issued.
	certIssue
	// certRenew has the published certificate replaced.
	certRenew
	// certRenewFailed reports a renewal that failed while the published certificate
	// stays valid: a Warning Event and the last refusal, the condition is left as it is.
	certRenewFailed
	// certPublish records and publishes the certificate the signer issued.
	certPublish
)

// certAction is what the certificate decision asks of the reconciler.
type certAction struct {
	verb certVerb
	// reason, message and eventType are those of certRefuse and certRenewFailed.
	reason, message, eventType string
	// requeueAfter is when the reconcile comes back (0: on the next event only).
	requeueAfter time.Duration
}

// certificateFacts is what the certificate decision reads, gathered once per reconcile,
// after checkPublished repaired the status from what this provider published.
type certificateFacts struct {
	// state is the administrative state in force (cluster.StateInForce).
	state authv1beta1.TenantCondition
	// published describes the certificate the status publishes, nil when it publishes
	// none (no signed certificate, or no description).
	published *authv1beta1.CertificateInfo
	// renewSerial is the serial the administrator asked, in the tenant record, to renew
	// now ("" none, or no record).
	renewSerial string
	// canPublish says whether this provider knows the API server URL and CA it hands to
	// consumers with a certificate.
	canPublish bool
	// approval is what the approval decision came to (decideApproval).
	approval approvalVerdict
	now      time.Time
}

// certificateFacts gathers what decideCertificate reads. t's status must have been
// checked by checkPublished; rec is the tenant record the reconcile read (nil: none).
func (r *Reconciler) certificateFacts(t *authv1beta1.Tenant, state authv1beta1.TenantCondition, rec *cluster.TenantRecord, approval approvalVerdict, now time.Time) certificateFacts {
	f := certificateFacts{state: state, canPublish: r.Options.APIServer != "" && len(r.Options.CA) != 0, approval: approval, now: now}
	if t.Status.AuthParams.HasCertificate() && t.Status.Certificate != nil {
		f.published = t.Status.Certificate
	}
	if rec != nil {
		f.renewSerial = rec.RenewSerial
	}
	return f
}

// certRule is one rule of the certificate decision: it applies or not (false), and when
// it does its action is the decision.
type certRule func(certificateFacts) (certAction, bool)

// decideCertificate decides what to do about the Tenant's certificate: the first rule
// that applies wins; when none does, a certificate is issued, or the published one
// renewed.
func decideCertificate(f certificateFacts) certAction {
	for _, rule := range [...]certRule{approvalRule, drainedRule, cordonedRule, notDueRule, unknownAPIServerRule} {
		if a, ok := rule(f); ok {
			return a
		}
	}
	if f.published != nil {
		return certAction{verb: certRenew}
	}
	return certAction{verb: certIssue}
}

// approvalRule: a key that waits for the administrator's approval gets no certificate
// (said first: it is what the consumer waits for), nor does a denied key, whose published
// certificate, as a Drained tenant's, is left to expire (its access is revoked).
func approvalRule(f certificateFacts) (certAction, bool) {
	switch {
	case f.approval.pending():
		return certAction{verb: certRefuse, reason: authv1beta1.ReasonApprovalPending, message: f.approval.message, eventType: corev1.EventTypeNormal}, true
	case f.approval.denied() && f.published != nil:
		return certAction{verb: certNothing}, true
	case f.approval.denied():
		return certAction{verb: certRefuse, reason: authv1beta1.ReasonApprovalDenied, message: f.approval.message, eventType: corev1.EventTypeWarning}, true
	}
	return certAction{}, false
}

// drainedRule: a Drained tenant gets no certificate, and a published one is left to
// expire (its access is revoked, not its certificate).
func drainedRule(f certificateFacts) (certAction, bool) {
	if f.state != authv1beta1.TenantConditionDrained {
		return certAction{}, false
	}
	if f.published != nil {
		return certAction{verb: certNothing}, true
	}
	return certAction{verb: certRefuse, reason: authv1beta1.ReasonDrainedNoCertificate,
		message: "the tenant is Drained: no certificate is issued", eventType: corev1.EventTypeNormal}, true
}

// cordonedRule: a Cordoned tenant gets no new certificate; one it holds is still renewed.
func cordonedRule(f certificateFacts) (certAction, bool) {
	if f.published != nil || f.state != authv1beta1.TenantConditionCordoned {
		return certAction{}, false
	}
	return certAction{verb: certRefuse, reason: authv1beta1.ReasonCordonedNoCertificate,
		message: "the tenant is Cordoned: no new certificate is issued", eventType: corev1.EventTypeNormal}, true
}

// notDueRule: a published certificate is renewed once its renewal time is reached, or
// ahead of time when the record names its very serial (liqoctl renew tenant); until then
// the reconcile comes back at its renewal time.
func notDueRule(f certificateFacts) (certAction, bool) {
	if f.published == nil || renewalDue(f) {
		return certAction{}, false
	}
	return certAction{verb: certWait, requeueAfter: f.published.RenewAfter.Sub(f.now)}, true
}

// renewalDue says whether the published certificate is to be renewed now.
func renewalDue(f certificateFacts) bool {
	c := f.published
	if c.RenewAfter != nil && !f.now.Before(c.RenewAfter.Time) {
		return true
	}
	// The administrator asked to replace this very certificate now, in the tenant record,
	// where the tenant cannot write.
	return f.renewSerial != "" && f.renewSerial == c.SerialNumber
}

// unknownAPIServerRule: without the API server URL and CA to hand out, no certificate is
// worth issuing.
func unknownAPIServerRule(f certificateFacts) (certAction, bool) {
	if f.canPublish {
		return certAction{}, false
	}
	return certAction{verb: certRefuse, reason: authv1beta1.ReasonAPIServerUnknown,
		message:   "the provider does not know the API server URL and CA to hand to consumers: run liqoctl install --api-server-url, or start the manager with --api-server-url",
		eventType: corev1.EventTypeWarning}, true
}

// afterIssuance decides what an issuance (issue or renew, renewing set for the latter)
// came to: a certificate is published; otherwise a first issuance says why it has none
// yet in its condition (a Normal Event while it is only pending), while a renewal that
// failed leaves the valid certificate and its condition in place and only warns; a
// pending renewal waits. Either way the reconcile comes back when the issuer says.
func afterIssuance(is *issuer.Issuance, renewing bool) certAction {
	if is.Cert != nil {
		return certAction{verb: certPublish}
	}
	evType := corev1.EventTypeNormal
	if is.Reason != authv1beta1.ReasonCertificatePending {
		evType = corev1.EventTypeWarning
	}
	a := certAction{verb: certWait, reason: is.Reason, message: is.Message, eventType: evType, requeueAfter: is.RequeueAfter}
	switch {
	case !renewing:
		a.verb = certRefuse
	case evType == corev1.EventTypeWarning:
		a.verb = certRenewFailed
	}
	return a
}
