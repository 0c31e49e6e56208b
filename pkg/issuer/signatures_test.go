package issuer

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSignaturesWakeOnlyForTheAnswer checks that a waiter wakes up when its own request
// gets a certificate or fails, and not for an approval alone or another request.
func TestSignaturesWakeOnlyForTheAnswer(t *testing.T) {
	csr := func(name string, cert bool, cond certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequest {
		c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if cert {
			c.Status.Certificate = []byte("pem")
		}
		if cond != "" {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: cond, Status: corev1.ConditionTrue}}
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		event *certificatesv1.CertificateSigningRequest
		wakes bool
	}{
		{"approved, no certificate yet", csr("a", false, certificatesv1.CertificateApproved), false},
		{"another request signed", csr("b", true, certificatesv1.CertificateApproved), false},
		{"signed", csr("a", true, certificatesv1.CertificateApproved), true},
		{"failed", csr("a", false, certificatesv1.CertificateFailed), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSignatures()
			answered, done := s.expect("a")
			defer done()
			s.Handler().OnUpdate(nil, tc.event)
			select {
			case <-answered:
				if !tc.wakes {
					t.Fatal("woke up")
				}
			default:
				if tc.wakes {
					t.Fatal("did not wake up")
				}
			}
		})
	}
}
