package issuer

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// TestCertificateInfoSurvivesTheStatus: the description of a certificate, written to a
// status and read back, equals the one made from the certificate, whatever its lifetime
// (a third of it need not be whole seconds), so that comparing them finds no tampering
// where there is none.
func TestCertificateInfoSurvivesTheStatus(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, life := range []time.Duration{time.Hour, 1001 * time.Second, 24*time.Hour + time.Second} {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: start, NotAfter: start.Add(life)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		for _, before := range []time.Duration{0, 10 * time.Minute} {
			info := CertificateInfo(cert, before)
			b, err := json.Marshal(info)
			if err != nil {
				t.Fatal(err)
			}
			var back authv1beta1.CertificateInfo
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(info, &back) {
				t.Errorf("lifetime %s, renew before %s: %+v read back as %+v", life, before, info, back)
			}
		}
	}
}
