package authn

import (
	"crypto/ed25519"
	"os"
	"testing"
	"time"
)

// The fuzz targets below cover every parser of input that comes from another cluster.
// They assert the invariants that matter: no panic, and never an acceptance of input
// that a stricter re-check would refuse.

func FuzzParsePublicKey(f *testing.F) {
	pemKey, _ := MarshalPublicKey(fixedKey().Public())
	raw, _ := os.ReadFile("testdata/liqo-docs-publickey.raw")
	f.Add(pemKey)
	f.Add(raw)
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := ParsePublicKey(data)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if _, err := Fingerprint(pub); err != nil {
			t.Fatalf("accepted key cannot be fingerprinted: %v", err)
		}
	})
}

func FuzzValidateCSR(f *testing.F) {
	good, _ := ForgeCSR(fixedKey(), "cl-consumer")
	liqo, _ := os.ReadFile("testdata/liqo-docs-csr.pem")
	f.Add(good)
	f.Add(liqo)
	f.Add(append(append([]byte{}, good...), good...))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n"))
	pub := fixedKey().Public()
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := ValidateCSR(data, pub, "cl-consumer")
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if csr.Subject.CommonName != "cl-consumer" || len(csr.Extensions) != 0 || !PublicKeysEqual(csr.PublicKey, pub) {
			t.Fatalf("accepted a CSR that breaks the rules: %+v", csr.Subject)
		}
	})
}

func FuzzVerifyNonceSignature(f *testing.F) {
	nonce := fixedNonce()
	sig, _ := SignNonce(fixedKey(), nonce)
	f.Add(nonce, sig)
	f.Add(nonce, []byte{})
	f.Add("", sig)
	pub := fixedKey().Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, n string, s []byte) {
		err := VerifyNonceSignature(pub, n, s)
		if err == nil && (CheckNonce(n) != nil || !ed25519.Verify(pub, []byte(n), s)) {
			t.Fatalf("accepted an invalid signature")
		}
	})
}

func FuzzCheckNonce(f *testing.F) {
	f.Add(fixedNonce())
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if CheckNonce(s) == nil {
			if _, err := SignNonce(fixedKey(), s); err != nil {
				t.Fatalf("a checked nonce cannot be signed: %v", err)
			}
		}
	})
}

func FuzzReadKubeconfig(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte("current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: https://x}}]\nusers: [{name: u, user: {client-certificate-data: eA==}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ReadKubeconfig(data)
		if err == nil && len(info.CertPEM) == 0 {
			t.Fatalf("accepted a kubeconfig without a certificate")
		}
	})
}

func FuzzVerifyCertificate(f *testing.F) {
	ca, _ := os.ReadFile("testdata/liqo-docs-ca.pem")
	crt, _ := os.ReadFile("testdata/liqo-docs-signedcrt.pem")
	raw, _ := os.ReadFile("testdata/liqo-docs-publickey.raw")
	pub, _ := ParsePublicKey(raw)
	f.Add(crt, ca)
	f.Add([]byte{}, ca)
	at := time.Date(2024, 8, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, c, bundle []byte) {
		cert, err := VerifyCertificate(c, bundle, pub, "cl01", at)
		if err == nil && !PublicKeysEqual(cert.PublicKey, pub) {
			t.Fatalf("accepted a certificate for another key")
		}
	})
}
