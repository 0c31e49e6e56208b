package issuer

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// CSRState returns the Approved, Denied and Failed conditions of a CertificateSigningRequest
// that are True (nil when absent).
func CSRState(csr *certificatesv1.CertificateSigningRequest) (approved, denied, failed *certificatesv1.CertificateSigningRequestCondition) {
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
