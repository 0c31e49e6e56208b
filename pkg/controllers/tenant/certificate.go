package tenant

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Annotations of the CertificateSigningRequests the provider creates.
const (
	// TenantAnnotation names the Tenant ("namespace/name") a CSR is for.
	TenantAnnotation = "liqo.io/tenant"
	// ReplacesAnnotation names the serial of the certificate a CSR renews ("" for the
	// first one), so that a reconcile finds the CSR of the issuance it is doing.
	ReplacesAnnotation = "liqo.io/replaces-serial"
)

// issuance is the state of the certificate a reconcile is waiting for.
type issuance struct {
	cert *x509.Certificate
	pem  []byte
	// reason and message explain why there is no certificate yet, or why it failed.
	reason, message string
	requeueAfter    time.Duration
}

func (r *Reconciler) usages() []certificatesv1.KeyUsage {
	return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
}

func currentSerial(t *authv1beta1.Tenant) string {
	if t.Status.Certificate == nil {
		return ""
	}
	return t.Status.Certificate.SerialNumber
}

// ownCSR reports whether csr is one this manager created for the current issuance of t:
// requested by the manager's own identity (the API server writes spec.username and
// spec.uid; nobody can forge them), for t's UID, renewing t's current certificate, and
// carrying exactly t's accepted request, signer, usages and lifetime.
func (r *Reconciler) ownCSR(csr *certificatesv1.CertificateSigningRequest, t *authv1beta1.Tenant) bool {
	return r.requestedBySelf(csr) && csr.Labels[cluster.TenantUIDLabel] == string(t.UID) &&
		csr.Annotations[ReplacesAnnotation] == currentSerial(t) &&
		bytes.Equal(csr.Spec.Request, t.Spec.CSR) && csr.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName &&
		sameUsages(csr.Spec.Usages, r.usages()) &&
		ptr.Deref(csr.Spec.ExpirationSeconds, 0) == int32(r.Options.CertificateLifetime/time.Second)
}

func (r *Reconciler) requestedBySelf(csr *certificatesv1.CertificateSigningRequest) bool {
	return r.Self.Username != "" && csr.Spec.Username == r.Self.Username && csr.Spec.UID == r.Self.UID
}

func sameUsages(a, b []certificatesv1.KeyUsage) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// findCSR returns this manager's CSR for the current issuance of t, if one exists, and the
// pending CSRs carrying t's labels that somebody else requested. It reads the cache; a CSR
// this process created a moment ago, which the cache may not hold yet, is read from the
// API server by the name remembered at creation (the expectations of kube's own
// controllers), so that no second request is ever made.
func (r *Reconciler) findCSR(ctx context.Context, t *authv1beta1.Tenant) (own *certificatesv1.CertificateSigningRequest, foreign []string, err error) {
	var list certificatesv1.CertificateSigningRequestList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{cluster.TenantUIDLabel: string(t.UID)}); err != nil {
		return nil, nil, err
	}
	for i := range list.Items {
		csr := &list.Items[i]
		switch {
		case r.ownCSR(csr, t):
			own = csr
		case !r.requestedBySelf(csr) && pending(csr):
			foreign = append(foreign, fmt.Sprintf("%s (requested by %q)", csr.Name, csr.Spec.Username))
		}
	}
	if name, ok := r.created.Load(t.UID); ok && own == nil {
		csr := &certificatesv1.CertificateSigningRequest{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: name.(string)}, csr)
		switch {
		case err == nil && r.ownCSR(csr, t):
			own = csr
		case err != nil && !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	return own, foreign, nil
}

func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	approved, denied, failed := cluster.CSRState(csr)
	return approved == nil && denied == nil && failed == nil
}

// ensureCertificate creates (once) and approves this manager's CertificateSigningRequest
// for a Tenant, and returns the certificate once the signer issued it. Before a request is
// submitted or approved, the spec is verified against the sealed acceptance and the
// cluster ID is checked to be no user with powers of its own.
func (r *Reconciler) ensureCertificate(ctx context.Context, t *authv1beta1.Tenant, now time.Time) (*issuance, error) {
	csr, foreign, err := r.findCSR(ctx, t)
	if err != nil {
		return nil, err
	}
	r.reportForeign(t, foreign)
	if csr == nil || pending(csr) {
		if is, err := r.checkSubmission(ctx, t); is != nil || err != nil {
			return is, err
		}
	}
	if csr == nil {
		if csr, err = r.createCSR(ctx, t); err != nil {
			return nil, err
		}
	}
	approved, denied, failed := cluster.CSRState(csr)
	switch {
	case denied != nil:
		return &issuance{reason: authv1beta1.ReasonCSRDenied, message: fmt.Sprintf("CertificateSigningRequest %s was denied: %s", csr.Name, denied.Message)}, nil
	case failed != nil:
		return &issuance{reason: authv1beta1.ReasonCSRFailed, message: fmt.Sprintf("the signer failed CertificateSigningRequest %s: %s", csr.Name, failed.Message)}, nil
	case approved == nil:
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "LiqoHandshakeAccepted",
			Message: fmt.Sprintf("the handshake of Tenant %s/%s was verified", t.Namespace, t.Name), LastUpdateTime: metav1.NewTime(now),
		})
		if err := r.Client.SubResource("approval").Update(ctx, csr); err != nil {
			return nil, fmt.Errorf("approving CertificateSigningRequest %s: %w", csr.Name, err)
		}
		approved = &csr.Status.Conditions[len(csr.Status.Conditions)-1]
	}
	if len(csr.Status.Certificate) == 0 {
		return r.waiting(csr, approved, now), nil
	}
	cert, err := authn.ParseCertificate(csr.Status.Certificate)
	if err == nil {
		err = checkIssued(cert, t)
	}
	if err != nil {
		return &issuance{reason: authv1beta1.ReasonIssuedCertificateBroken, message: fmt.Sprintf("CertificateSigningRequest %s: %v", csr.Name, err)}, nil
	}
	return &issuance{cert: cert, pem: csr.Status.Certificate}, nil
}

// checkSubmission verifies, right before a request goes to the signer, that the spec is
// the sealed, accepted one and that the cluster ID holds no permission of its own. A
// refusal is returned as an issuance that says why.
func (r *Reconciler) checkSubmission(ctx context.Context, t *authv1beta1.Tenant) (*issuance, error) {
	if err := VerifySealed(t, r.Key.Public()); err != nil {
		return &issuance{reason: authv1beta1.ReasonSubmissionRefused, message: "no certificate is requested: " + err.Error()}, nil
	}
	problems, err := r.extraPermissions(ctx, t)
	if err != nil || len(problems) == 0 {
		return nil, err
	}
	return &issuance{reason: authv1beta1.ReasonClusterIDHasPermissions, requeueAfter: time.Minute, message: fmt.Sprintf(
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

func (r *Reconciler) waiting(csr *certificatesv1.CertificateSigningRequest, approved *certificatesv1.CertificateSigningRequestCondition, now time.Time) *issuance {
	since := approved.LastUpdateTime.Time
	if since.IsZero() {
		since = csr.CreationTimestamp.Time
	}
	waited := now.Sub(since)
	if waited > r.Options.CSRTimeout {
		return &issuance{reason: authv1beta1.ReasonApprovedNotIssued, requeueAfter: r.Options.CSRTimeout, message: fmt.Sprintf(
			"CertificateSigningRequest %s was approved %s ago but no certificate was issued: does this cluster run a signer for %s? (some managed offerings do not)",
			csr.Name, waited.Round(time.Second), certificatesv1.KubeAPIServerClientSignerName)}
	}
	return &issuance{reason: authv1beta1.ReasonCertificatePending, requeueAfter: r.Options.CSRTimeout - waited,
		message: fmt.Sprintf("waiting for the signer to issue CertificateSigningRequest %s", csr.Name)}
}

// createCSR submits t's accepted request under a name the API server makes unique
// (generateName): nobody can create it ahead of the manager.
func (r *Reconciler) createCSR(ctx context.Context, t *authv1beta1.Tenant) (*certificatesv1.CertificateSigningRequest, error) {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "liqo-" + string(t.Spec.ClusterID) + "-",
			Labels: map[string]string{cluster.ManagedByLabel: cluster.ManagedByValue, cluster.TenantUIDLabel: string(t.UID),
				cluster.RemoteClusterIDLabel: string(t.Spec.ClusterID)},
			Annotations: map[string]string{TenantAnnotation: t.Namespace + "/" + t.Name, ReplacesAnnotation: currentSerial(t)},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           t.Spec.CSR,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To(int32(r.Options.CertificateLifetime / time.Second)),
			Usages:            r.usages(),
		},
	}
	if err := r.Client.Create(ctx, csr); err != nil {
		return nil, fmt.Errorf("creating a CertificateSigningRequest for Tenant %s/%s: %w", t.Namespace, t.Name, err)
	}
	r.created.Store(t.UID, csr.Name)
	if !r.ownCSR(csr, t) {
		// The API server recorded another requester than the manager's identity (it was
		// read at start): never approve it.
		return nil, fmt.Errorf("CertificateSigningRequest %s was recorded as requested by %q, not by this manager (%q): it is left unapproved",
			csr.Name, csr.Spec.Username, r.Self.Username)
	}
	return csr, nil
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

// certificateInfo describes an issued certificate and when to renew it.
func (r *Reconciler) certificateInfo(cert *x509.Certificate) *authv1beta1.CertificateInfo {
	renew := cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
	if r.Options.RenewBefore > 0 {
		renew = cert.NotAfter.Add(-r.Options.RenewBefore)
	}
	return &authv1beta1.CertificateInfo{
		SerialNumber: cert.SerialNumber.Text(16),
		NotBefore:    ptr.To(metav1.NewTime(cert.NotBefore)),
		NotAfter:     ptr.To(metav1.NewTime(cert.NotAfter)),
		RenewAfter:   ptr.To(metav1.NewTime(renew)),
	}
}

// deleteCSRs removes the CertificateSigningRequests this manager made for a Tenant, except
// a pending one when keepPending is set (a renewal may be waiting for it). CSRs somebody
// else made are never touched: they are reported.
// reader is the cache, or the API server where a CSR created a moment ago must be found.
func (r *Reconciler) deleteCSRs(ctx context.Context, reader client.Reader, t *authv1beta1.Tenant, keepPending bool) error {
	var list certificatesv1.CertificateSigningRequestList
	if err := reader.List(ctx, &list, client.MatchingLabels{cluster.TenantUIDLabel: string(t.UID)}); err != nil {
		return err
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if !r.requestedBySelf(csr) || (keepPending && pending(csr)) {
			continue
		}
		if err := r.Client.Delete(ctx, csr, client.Preconditions{UID: &csr.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting CertificateSigningRequest %s: %w", csr.Name, err)
		}
	}
	return nil
}

// SelfReviewer asks the API server who the client is.
func SelfReviewer(ctx context.Context, c client.Client) (authenticationv1.UserInfo, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("asking the API server who this manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo, nil
}
