package tenant

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/issuer"
)

// Annotations of the CertificateSigningRequests the provider creates.
const (
	// TenantAnnotation names the Tenant ("namespace/name") a CSR is for.
	TenantAnnotation = "liqo.io/tenant"
	// ReplacesAnnotation names the serial of the certificate a CSR renews.
	ReplacesAnnotation = issuer.ReplacesAnnotation
)

func currentSerial(t *authv1beta1.Tenant) string {
	if t.Status.Certificate == nil {
		return ""
	}
	return t.Status.Certificate.SerialNumber
}

// subject is what the Tenant's certificate is issued for.
func subject(t *authv1beta1.Tenant) issuer.Subject {
	return issuer.Subject{Owner: t, Annotation: TenantAnnotation, RemoteID: string(t.Spec.ClusterID), Request: t.Spec.CSR,
		CurrentSerial: currentSerial(t), Reason: "LiqoHandshakeAccepted", Message: fmt.Sprintf("the handshake of Tenant %s/%s was verified", t.Namespace, t.Name)}
}

// ensureCertificate has the Tenant's certificate issued: before a request is submitted or
// approved, the spec is verified against the sealed acceptance and the cluster ID is
// checked to be no user with powers of its own; the certificate issued is checked to be
// what was asked.
func (r *Reconciler) ensureCertificate(ctx context.Context, t *authv1beta1.Tenant, now time.Time) (*issuer.Issuance, error) {
	is, foreign, err := r.issuer().Ensure(ctx, subject(t), now, func(ctx context.Context) (*issuer.Issuance, error) { return r.checkSubmission(ctx, t) })
	if err != nil {
		return nil, err
	}
	r.reportForeign(t, foreign)
	if is.Cert != nil {
		if err := checkIssued(is.Cert, t); err != nil {
			return &issuer.Issuance{Reason: authv1beta1.ReasonIssuedCertificateBroken, Message: err.Error()}, nil
		}
	}
	return is, nil
}

// checkSubmission verifies, right before a request goes to the signer, that the spec is
// the sealed, accepted one and that the cluster ID holds no permission of its own. A
// refusal is returned as an issuance that says why.
func (r *Reconciler) checkSubmission(ctx context.Context, t *authv1beta1.Tenant) (*issuer.Issuance, error) {
	if err := VerifySealed(t, r.Key.Public()); err != nil {
		return &issuer.Issuance{Reason: authv1beta1.ReasonSubmissionRefused, Message: "no certificate is requested: " + err.Error()}, nil
	}
	problems, err := r.extraPermissions(ctx, t)
	if err != nil || len(problems) == 0 {
		return nil, err
	}
	return &issuer.Issuance{Reason: authv1beta1.ReasonClusterIDHasPermissions, RequeueAfter: time.Minute, Message: fmt.Sprintf(
		"no certificate is issued: user %q (the consumer's cluster ID) with group %q already has permissions this provider did not grant to the tenant, and a certificate would hand them over: %s. Remove them, or give the consumer another cluster ID",
		t.Spec.ClusterID, cluster.UserGroup, strings.Join(problems, "; "))}, nil
}

// checkIssued checks that the signer issued what was asked: the tenant's key, CN and O.
func checkIssued(cert *x509.Certificate, t *authv1beta1.Tenant) error {
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return err
	}
	if !authn.PublicKeysEqual(cert.PublicKey, pub) {
		return fmt.Errorf("the signer issued a certificate for another key")
	}
	if cert.Subject.CommonName != string(t.Spec.ClusterID) || !slices.Equal(cert.Subject.Organization, []string{cluster.UserGroup}) {
		return fmt.Errorf("the signer issued a certificate for %q, not CN=%s, O=%s", cert.Subject, t.Spec.ClusterID, cluster.UserGroup)
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

// SelfReviewer asks the API server who the client is.
func SelfReviewer(ctx context.Context, c client.Client) (authenticationv1.UserInfo, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("asking the API server who this manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo, nil
}
