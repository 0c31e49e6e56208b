package authn

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"strings"
	"testing"
)

// Characterisation of which refusal wins in ValidateCSRFor when a CSR has several
// defects, run on the code before and after the split (decodeCSRPEM,
// checkCSRRequestsNothingElse).
func TestValidateCSRForPrecedence(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	mk := func(tmpl *x509.CertificateRequest) []byte {
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Bytes: der})
	}
	good := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "cl-a", Organization: []string{"liqo"}}}
	withSAN := &x509.CertificateRequest{Subject: good.Subject, DNSNames: []string{"x"}, IPAddresses: []net.IP{net.IPv4(1, 2, 3, 4)}}
	withExt := &x509.CertificateRequest{Subject: good.Subject, ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 2, 3}, Value: []byte{5, 0}}}}
	withAttr := &x509.CertificateRequest{Subject: good.Subject, DNSNames: []string{"x"}, ExtraExtensions: withExt.ExtraExtensions}
	badCNSAN := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "cl-b", Organization: []string{"liqo"}}, DNSNames: []string{"x"}}
	badOrgExt := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "cl-a", Organization: []string{"other"}}, ExtraExtensions: withExt.ExtraExtensions}
	goodPEM := mk(good)
	tamper := func(p []byte) []byte {
		b, _ := pem.Decode(p)
		der := append([]byte{}, b.Bytes...)
		der[len(der)-1] ^= 1 // the signature
		return pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Bytes: der})
	}
	cases := []struct {
		name string
		data []byte
		pub  any
		want Reason
	}{
		{"good", goodPEM, pub, ""},
		{"good, no key", goodPEM, nil, ""},
		{"too large beats not PEM", []byte(strings.Repeat("x", MaxCSRSize+1)), pub, ReasonCSRTooLarge},
		{"too large PEM", append(goodPEM, []byte(strings.Repeat(" ", MaxCSRSize))...), pub, ReasonCSRTooLarge},
		{"not PEM", []byte("hello"), pub, ReasonCSRNotPEM},
		{"wrong type", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), pub, ReasonCSRNotPEM},
		{"headers", pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Headers: map[string]string{"a": "b"}, Bytes: []byte{1}}), pub, ReasonCSRNotPEM},
		{"two blocks beat garbage DER", append(pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Bytes: []byte{1}}), goodPEM...), pub, ReasonCSRMultipleBlocks},
		{"trailing", append(append([]byte{}, goodPEM...), []byte("junk")...), pub, ReasonCSRTrailingData},
		{"trailing whitespace ok", append(append([]byte{}, goodPEM...), []byte("\n \n")...), pub, ""},
		{"malformed", pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Bytes: []byte{1, 2}}), pub, ReasonCSRMalformed},
		{"bad signature beats wrong key", tamper(goodPEM), otherPub, ReasonCSRSelfSignatureInvalid},
		{"wrong key beats SAN", mk(withSAN), otherPub, ReasonCSRKeyMismatch},
		{"wrong key beats bad CN", mk(badCNSAN), otherPub, ReasonCSRKeyMismatch},
		{"bad CN beats SAN", mk(badCNSAN), pub, ReasonCSRCommonNameMismatch},
		{"bad CN beats SAN, no key", mk(badCNSAN), nil, ReasonCSRCommonNameMismatch},
		{"bad org beats extension", mk(badOrgExt), pub, ReasonCSROrganizationMismatch},
		{"SAN beats extension", mk(withAttr), pub, ReasonCSRSubjectAltNames},
		{"SAN", mk(withSAN), nil, ReasonCSRSubjectAltNames},
		{"extension", mk(withExt), pub, ReasonCSRExtensions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := any(tc.pub)
			var csr *x509.CertificateRequest
			var err error
			if p == nil {
				csr, err = ValidateCSRFor(tc.data, nil, "cl-a", "liqo")
			} else {
				csr, err = ValidateCSRFor(tc.data, p.(ed25519.PublicKey), "cl-a", "liqo")
			}
			if got := ReasonOf(err); got != tc.want || (err == nil) != (tc.want == "") || (csr != nil) != (err == nil) {
				t.Fatalf("reason %q (err %v, csr %v), want %q", got, err, csr != nil, tc.want)
			}
		})
	}
}
