package tenant

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// Annotations of the CertificateSigningRequests the provider creates.
const (
	// ReplacesAnnotation names the serial of the certificate a CSR renews.
	ReplacesAnnotation = wire.ReplacesAnnotation
)

func currentSerial(t *authv1beta1.Tenant) string {
	if t.Status.Certificate == nil {
		return ""
	}
	return t.Status.Certificate.SerialNumber
}

// subject is what the Tenant's certificate is issued for.
func subject(t *authv1beta1.Tenant) issuer.Subject {
	return issuer.Subject{Owner: t, Annotation: wire.TenantAnnotation, RemoteID: string(t.Spec.ClusterID), Request: t.Spec.CSR,
		CurrentSerial: currentSerial(t), Reason: authv1beta1.ReasonLiqoHandshakeAccepted, Message: fmt.Sprintf("the handshake of Tenant %s/%s was verified", t.Namespace, t.Name)}
}

// ensureCertificate has the Tenant's certificate issued: before a request is submitted or
// approved, the spec is verified against the sealed acceptance and the cluster ID is
// checked to be no user with powers of its own; the certificate issued is checked to be
// what was asked.
func (r *Reconciler) ensureCertificate(ctx context.Context, t *authv1beta1.Tenant, now time.Time, check func(context.Context) (*issuer.Issuance, error)) (*issuer.Issuance, error) {
	is, foreign, err := r.issuer().Ensure(ctx, subject(t), now, check)
	if err != nil {
		return nil, err
	}
	r.reportForeign(t, foreign)
	if is.Cert != nil {
		if err := checkIssued(is.Cert, t); err != nil {
			return &issuer.Issuance{Reason: authv1beta1.ReasonIssuedCertificateBroken, Message: err.Error()}, nil //nolint:nilerr // a broken certificate is reported, not retried
		}
	}
	return is, nil
}

// startCheckSubmission starts checkSubmission of a copy of t at once: the reviews it asks
// run while the Tenant gets its finalizer, before the request is made. The copy is taken
// now: what the check reads of it (the spec and the sealed acceptance) nothing changes
// before its verdict is taken, and the reconcile goes on writing t meanwhile.
func (r *Reconciler) startCheckSubmission(ctx context.Context, t *authv1beta1.Tenant) *pendingCheck {
	p := &pendingCheck{done: make(chan struct{})}
	checked := t.DeepCopy()
	go func() {
		defer close(p.done)
		p.is, p.err = r.checkSubmission(ctx, checked)
	}()
	return p
}

// pendingCheck is a checkSubmission under way.
type pendingCheck struct {
	done chan struct{}
	is   *issuer.Issuance
	err  error
}

// wait is the check's verdict, for issuer.Ensure (which asks it only before it makes or
// approves a request).
func (p *pendingCheck) wait(ctx context.Context) (*issuer.Issuance, error) {
	select {
	case <-p.done:
		return p.is, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// finish waits for the check to end, asked for or not: no review outlives its reconcile.
func (p *pendingCheck) finish() { <-p.done }

// checkSubmission verifies, right before a request goes to the signer, that the spec is
// the sealed, accepted one and that the cluster ID holds no permission of its own. A
// refusal is returned as an issuance that says why.
func (r *Reconciler) checkSubmission(ctx context.Context, t *authv1beta1.Tenant) (*issuer.Issuance, error) {
	keys, err := r.Keys.Keys(ctx)
	if err != nil {
		return nil, err
	}
	if sealErr := acceptance.VerifySealedKeys(t, keys); sealErr != nil {
		return &issuer.Issuance{Reason: authv1beta1.ReasonSubmissionRefused, Message: "no certificate is requested: " + sealErr.Error()}, nil //nolint:nilerr // a refusal is an issuance that says why, not a retry
	}
	problems, err := r.extraPermissions(ctx, t)
	if err != nil || len(problems) == 0 {
		return nil, err
	}
	return &issuer.Issuance{Reason: authv1beta1.ReasonClusterIDHasPermissions, RequeueAfter: permissionsRecheck, Message: fmt.Sprintf(
		"no certificate is issued: user %q (the consumer's cluster ID) with group %q already has permissions this provider did not grant to the tenant, and a certificate would hand them over: %s. Remove them, or give the consumer another cluster ID",
		t.Spec.ClusterID, wire.UserGroup, strings.Join(problems, "; "))}, nil
}

// permissionsRecheck is when a Tenant refused because its cluster ID already holds
// permissions is decided again: they are granted by bindings (ClusterRoleBindings among
// them) whose changes this controller does not reconcile on, so no event says that the
// administrator removed them.
const permissionsRecheck = time.Minute

// checkIssued checks that the signer issued what was asked: the tenant's key, CN and O.
func checkIssued(cert *x509.Certificate, t *authv1beta1.Tenant) error {
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return err
	}
	if !authn.PublicKeysEqual(cert.PublicKey, pub) {
		return fmt.Errorf("the signer issued a certificate for another key")
	}
	want := []string{wire.UserGroup}
	if csr, err := authn.ValidateCSR(t.Spec.CSR, pub, string(t.Spec.ClusterID)); err == nil {
		want = slices.Sorted(slices.Values(csr.Subject.Organization))
	}
	if cert.Subject.CommonName != string(t.Spec.ClusterID) || !slices.Equal(slices.Sorted(slices.Values(cert.Subject.Organization)), want) {
		return fmt.Errorf("the signer issued a certificate for %q, not CN=%s, O=%s", cert.Subject, t.Spec.ClusterID, strings.Join(want, "+"))
	}
	return nil
}

func (r *Reconciler) reportForeign(t *authv1beta1.Tenant, foreign []string) {
	if len(foreign) == 0 {
		r.setCondition(t, authv1beta1.ConditionCSRIntegrity, true, authv1beta1.ReasonOnlyOwnCSRs, "only CertificateSigningRequests liqo-auth created carry this Tenant's labels", "")
		return
	}
	r.setCondition(t, authv1beta1.ConditionCSRIntegrity, false, authv1beta1.ReasonForeignCSR, fmt.Sprintf(
		"CertificateSigningRequests not created by liqo-auth carry this Tenant's labels: %s; they are never approved: delete them and find out who created them", strings.Join(foreign, ", ")),
		corev1.EventTypeWarning)
}

// checkPublished compares what the Tenant's status publishes with what this provider
// published: whoever may write tenants/status can rewrite the CA, the API server URL or
// the certificate a consumer will trust. A certificate other than the one the record says
// this provider last published in this Tenant is replaced by that one, or, when the record
// has none that still fits, wiped so that one is issued anew: a status writer cannot make
// the provider issue certificates at will, nor roll a renewal back. A CA or URL that
// differs from this provider's is put back, and so is a proxy other than the one the spec
// asks for; the record says which CA and URL it published.
// cached is the record as the reconcile read it from the cache.
func (r *Reconciler) checkPublished(ctx context.Context, t *authv1beta1.Tenant, cached *cluster.TenantRecord, now time.Time) error {
	ap := t.Status.AuthParams
	if !ap.HasCertificate() || t.Status.Certificate == nil {
		// Nothing published: the first issuance, or a status writer cleared it. The
		// latter gets back what this provider published in this Tenant, from the record
		// (read with the Tenant's other decisions), rather than a new certificate.
		r.restorePublished(t, cached, now)
		return nil
	}
	rec, ok, err := r.issuedHere(ctx, t, cached)
	if err != nil {
		return err
	}
	if !ok {
		if r.restorePublished(t, rec, now) {
			return nil
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonStatusTampered, "CheckPublished",
			"the status published a certificate this provider did not issue for the accepted key: it is replaced by a new one")
		t.Status.AuthParams, t.Status.Certificate = nil, nil
		return nil
	}
	if ap.APIServer != r.Options.APIServer || !bytes.Equal(ap.CA, r.Options.CA) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonStatusTampered, "CheckPublished",
			"the status published API server %q and a CA other than this provider's: put back", ap.APIServer)
		ap.APIServer, ap.CA = r.Options.APIServer, r.Options.CA
	}
	if got, asked := ptr.Deref(ap.ProxyURL, ""), ptr.Deref(t.Spec.ProxyURL, ""); got != asked {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonStatusTampered, "CheckPublished",
			"the status published proxy %q, while the Tenant asks for %q: put back", got, asked)
		ap.ProxyURL = t.Spec.ProxyURL
	}
	// When the certificate is renewed is read from the certificate itself, never from what
	// the status says: a status writer who back-dated status.certificate.renewAfter would
	// have the provider issue a new certificate (TestAttack5StatusWriterBackdatesRenewAfter).
	if cert, parseCertificateErr := authn.ParseCertificate(ap.SignedCRT); parseCertificateErr == nil {
		if info := issuer.CertificateInfo(cert, r.Options.RenewBefore); !equality.Semantic.DeepEqual(info, t.Status.Certificate) {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonStatusTampered, "CheckPublished",
				"the status described certificate %s otherwise than the certificate says: put back", info.SerialNumber)
			t.Status.Certificate = info
		}
	}
	caFP, err := authn.CAFingerprint(r.Options.CA)
	if err != nil {
		return fmt.Errorf("the CA handed to consumers is not valid: %w", err)
	}
	if rec.PublishedCAFingerprint == caFP && rec.PublishedAPIServer == r.Options.APIServer {
		return nil
	}
	return cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID), false, func(rec *cluster.TenantRecord) error {
		rec.PublishedCAFingerprint, rec.PublishedAPIServer = caFP, r.Options.APIServer
		return nil
	})
}

// restorePublished puts back, in a Tenant whose status was rewritten, the certificate the
// record rec says this provider last published in this very Tenant, when it still fits
// (restorable). It says whether it did.
func (r *Reconciler) restorePublished(t *authv1beta1.Tenant, rec *cluster.TenantRecord, now time.Time) bool {
	cert, pem, ok := restorable(t, rec, now)
	if !ok {
		return false
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, authv1beta1.ReasonStatusTampered, "CheckPublished",
		"the status does not publish the certificate this provider last published in it (rewritten, or a save that lost a race): %s is put back", cert.SerialNumber.Text(16))
	reason := authv1beta1.ReasonCertificateIssued
	if c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionCertificateIssued); c != nil && c.Reason == authv1beta1.ReasonCertificateRenewed {
		reason = c.Reason
	}
	r.publish(t, cert, pem, reason, "")
	return true
}

// restorable returns the certificate (and its PEM) the record rec says this provider last
// published in Tenant t, when it still fits: recorded as issued for the accepted key, as
// the control-plane certificate (no slice's), not expired at now. It reads of t only its
// UID and the accepted key, which only a sealed acceptance sets.
func restorable(t *authv1beta1.Tenant, rec *cluster.TenantRecord, now time.Time) (*x509.Certificate, []byte, bool) {
	cert, pem, ok := rec.PublishedIn(string(t.UID))
	if !ok || t.Status.AcceptedKeyFingerprint == "" || !now.Before(cert.NotAfter) {
		return nil, nil, false
	}
	fp, err := authn.Fingerprint(cert.PublicKey)
	serial := cert.SerialNumber.Text(16)
	if err != nil || fp != t.Status.AcceptedKeyFingerprint ||
		!slices.ContainsFunc(rec.Certificates, func(c cluster.IssuedCertificate) bool {
			return c.Serial == serial && c.KeyFingerprint == fp && c.Slice == ""
		}) {
		return nil, nil, false
	}
	return cert, pem, true
}

// issuedHere says whether the certificate the Tenant publishes is the one this provider
// last published in this Tenant (by its record; a record from before it kept that: one it
// issued for the accepted key), the one status.certificate describes. It returns the record
// it decided on: cached, the reconcile's, when that says yes; else the API server's, which
// a certificate recorded a moment ago may be in only.
func (r *Reconciler) issuedHere(ctx context.Context, t *authv1beta1.Tenant, cached *cluster.TenantRecord) (*cluster.TenantRecord, bool, error) {
	if publishesRecorded(t, cached) {
		return cached, true, nil
	}
	live, err := cluster.GetTenantRecord(ctx, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID))
	if err != nil {
		return nil, false, err
	}
	return live, publishesRecorded(t, live), nil
}

// publishesRecorded says whether the certificate the Tenant's status publishes is the one
// the record rec (nil: none) says this provider last published in this Tenant (a record
// from before it kept that: one it issued for the accepted key), and the one
// status.certificate describes.
func publishesRecorded(t *authv1beta1.Tenant, rec *cluster.TenantRecord) bool {
	cert, err := authn.ParseCertificate(t.Status.AuthParams.SignedCRT)
	if err != nil || rec == nil {
		return false
	}
	fp, err := authn.Fingerprint(cert.PublicKey)
	serial := cert.SerialNumber.Text(16)
	if err != nil || fp != t.Status.AcceptedKeyFingerprint || t.Status.Certificate.SerialNumber != serial {
		return false
	}
	if rec.PublishedForTenant != "" {
		last, _, ok := rec.PublishedIn(string(t.UID))
		return ok && last.SerialNumber.Cmp(cert.SerialNumber) == 0
	}
	return slices.ContainsFunc(rec.Certificates, func(c cluster.IssuedCertificate) bool { return c.Serial == serial && c.KeyFingerprint == fp })
}
