package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"time"

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

// Reasons of the CertificateIssued condition.
const (
	ReasonCertificatePending      = "CertificatePending"
	ReasonApprovedNotIssued       = "ApprovedNotIssued"
	ReasonCSRDenied               = "CSRDenied"
	ReasonCSRFailed               = "CSRFailed"
	ReasonCertificateIssued       = "CertificateIssued"
	ReasonCertificateRenewed      = "CertificateRenewed"
	ReasonCordonedNoCertificate   = "Cordoned"
	ReasonDrainedNoCertificate    = "Drained"
	ReasonIssuedCertificateBroken = "IssuedCertificateInvalid"
	// TenantAnnotation on a CSR names the Tenant ("namespace/name") it is for.
	TenantAnnotation = "liqo.io/tenant"
)

// issuance is the state of the certificate a reconcile is waiting for.
type issuance struct {
	csrName string
	cert    *x509.Certificate
	pem     []byte
	// reason and message explain why there is no certificate yet, or why it failed.
	reason, message string
	requeueAfter    time.Duration
}

// csrName is deterministic for a Tenant, its accepted CSR and the certificate it replaces,
// so that a reconcile interrupted anywhere finds its CSR again instead of creating another.
func csrName(t *authv1beta1.Tenant) string {
	prev := ""
	if t.Status.Certificate != nil {
		prev = t.Status.Certificate.SerialNumber
	}
	sum := sha256.Sum256([]byte(string(t.UID) + "/" + t.Status.AcceptedCSRDigest + "/" + prev))
	return fmt.Sprintf("liqo-%s-%s", t.Spec.ClusterID, hex.EncodeToString(sum[:])[:10])
}

// ensureCertificate creates (once) and approves the CertificateSigningRequest of a Tenant
// and returns the certificate once the signer issued it.
func (r *Reconciler) ensureCertificate(ctx context.Context, t *authv1beta1.Tenant, now time.Time) (*issuance, error) {
	is := &issuance{csrName: csrName(t)}
	csr, err := r.getOrCreateCSR(ctx, t, is.csrName)
	if err != nil {
		return nil, err
	}
	approved, denied, failed := csrState(csr)
	switch {
	case denied != nil:
		is.reason, is.message = ReasonCSRDenied, fmt.Sprintf("CertificateSigningRequest %s was denied: %s", csr.Name, denied.Message)
		return is, nil
	case failed != nil:
		is.reason, is.message = ReasonCSRFailed, fmt.Sprintf("the signer failed CertificateSigningRequest %s: %s", csr.Name, failed.Message)
		return is, nil
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
		since := approved.LastUpdateTime.Time
		if since.IsZero() {
			since = csr.CreationTimestamp.Time
		}
		if waited := now.Sub(since); waited > r.Options.CSRTimeout {
			is.reason = ReasonApprovedNotIssued
			is.message = fmt.Sprintf("CertificateSigningRequest %s was approved %s ago but no certificate was issued: does this cluster run a signer for %s? (some managed offerings do not)",
				csr.Name, waited.Round(time.Second), certificatesv1.KubeAPIServerClientSignerName)
			is.requeueAfter = r.Options.CSRTimeout
		} else {
			is.reason, is.message = ReasonCertificatePending, fmt.Sprintf("waiting for the signer to issue CertificateSigningRequest %s", csr.Name)
			is.requeueAfter = r.Options.CSRTimeout - waited
		}
		return is, nil
	}
	cert, err := authn.ParseCertificate(csr.Status.Certificate)
	if err == nil {
		var pub any
		if pub, err = authn.ParsePublicKey(t.Spec.PublicKey); err == nil && !authn.PublicKeysEqual(cert.PublicKey, pub) {
			err = fmt.Errorf("the signer issued a certificate for another key")
		}
	}
	if err != nil {
		is.reason, is.message = ReasonIssuedCertificateBroken, fmt.Sprintf("CertificateSigningRequest %s: %v", csr.Name, err)
		return is, nil
	}
	is.cert, is.pem = cert, csr.Status.Certificate
	return is, nil
}

func (r *Reconciler) getOrCreateCSR(ctx context.Context, t *authv1beta1.Tenant, name string) (*certificatesv1.CertificateSigningRequest, error) {
	csr := &certificatesv1.CertificateSigningRequest{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, csr)
	if err == nil || !apierrors.IsNotFound(err) {
		return csr, err
	}
	csr = &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{cluster.ManagedByLabel: cluster.ManagedByValue, cluster.TenantUIDLabel: string(t.UID),
				cluster.RemoteClusterIDLabel: string(t.Spec.ClusterID)},
			Annotations: map[string]string{TenantAnnotation: t.Namespace + "/" + t.Name},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           t.Spec.CSR,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To(int32(r.Options.CertificateLifetime / time.Second)),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}
	err = r.Client.Create(ctx, csr)
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier reconcile the cache has not seen yet.
		csr = &certificatesv1.CertificateSigningRequest{}
		err = r.APIReader.Get(ctx, client.ObjectKey{Name: name}, csr)
	}
	if err != nil {
		return nil, fmt.Errorf("creating CertificateSigningRequest %s: %w", name, err)
	}
	return csr, nil
}

func csrState(csr *certificatesv1.CertificateSigningRequest) (approved, denied, failed *certificatesv1.CertificateSigningRequestCondition) {
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = c
		case certificatesv1.CertificateDenied:
			denied = c
		case certificatesv1.CertificateFailed:
			failed = c
		}
	}
	return approved, denied, failed
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

// deleteCSRs removes the CertificateSigningRequests made for a Tenant, except keep (the
// one a renewal may be waiting for).
func (r *Reconciler) deleteCSRs(ctx context.Context, t *authv1beta1.Tenant, keep string) error {
	var list certificatesv1.CertificateSigningRequestList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{cluster.TenantUIDLabel: string(t.UID)}); err != nil {
		return err
	}
	for i := range list.Items {
		if csr := &list.Items[i]; csr.Name != keep {
			if err := r.Client.Delete(ctx, csr); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting CertificateSigningRequest %s: %w", csr.Name, err)
			}
		}
	}
	return nil
}
