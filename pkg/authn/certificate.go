package authn

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"time"
)

// MaxCertificateSize bounds a certificate or CA bundle given by another cluster.
const MaxCertificateSize = 64 << 10

// PEMTypeCertificate is the PEM block type of an X.509 certificate.
const PEMTypeCertificate = "CERTIFICATE"

// ParseCertificate decodes a single PEM certificate.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	if len(data) > MaxCertificateSize {
		return nil, refuse(ReasonCertificateInvalid, fmt.Sprintf("the certificate is %d bytes, more than the %d allowed", len(data), MaxCertificateSize), nil)
	}
	block, err := singlePEMBlock(data, PEMTypeCertificate)
	if err != nil {
		return nil, refuse(ReasonCertificateInvalid, "the signed certificate is not a single PEM CERTIFICATE block", err)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonCertificateInvalid, "the signed certificate cannot be parsed", err)
	}
	return cert, nil
}

// ParseCABundle decodes a bundle of one or more PEM certificates into a pool.
func ParseCABundle(data []byte) (*x509.CertPool, error) {
	if len(data) > MaxCertificateSize {
		return nil, refuse(ReasonCAInvalid, fmt.Sprintf("the CA bundle is %d bytes, more than the %d allowed", len(data), MaxCertificateSize), nil)
	}
	pool := x509.NewCertPool()
	rest, n := data, 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != PEMTypeCertificate {
			return nil, refuse(ReasonCAInvalid, fmt.Sprintf("the CA bundle holds a %q PEM block", block.Type), nil)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, refuse(ReasonCAInvalid, "a certificate of the CA bundle cannot be parsed", err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, refuse(ReasonCAInvalid, "the CA bundle holds no PEM certificate", nil)
	}
	return pool, nil
}

// CAFingerprint returns "sha256:" and the lowercase hex SHA-256 of the DER of every
// certificate in a PEM bundle, concatenated in order. For a single CA it is the familiar
// certificate fingerprint.
func CAFingerprint(data []byte) (string, error) {
	if _, err := ParseCABundle(data); err != nil {
		return "", err
	}
	h := sha256.New()
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		h.Write(block.Bytes)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyCertificate is the consumer's check of the certificate a provider hands back,
// before anything is written: it is a client certificate for the consumer's own key,
// issued to user clusterID, chaining to the given CA, and valid at now.
func VerifyCertificate(certPEM, caPEM []byte, pub crypto.PublicKey, clusterID string, now time.Time) (*x509.Certificate, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	pool, err := ParseCABundle(caPEM)
	if err != nil {
		return nil, err
	}
	if !PublicKeysEqual(cert.PublicKey, pub) {
		return nil, refuse(ReasonCertificateKeyMismatch, "the signed certificate is for another key than this cluster's", nil)
	}
	if cert.Subject.CommonName != clusterID {
		return nil, refuse(ReasonCertificateSubject, fmt.Sprintf("the signed certificate is for user %q, not for this cluster (%q)", cert.Subject.CommonName, clusterID), nil)
	}
	if now.After(cert.NotAfter) {
		return nil, refuse(ReasonCertificateExpired, fmt.Sprintf("the signed certificate expired at %s: run liqoctl authenticate again", cert.NotAfter.UTC().Format(time.RFC3339)), nil)
	}
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := cert.Verify(opts); err != nil {
		return nil, refuse(ReasonCertificateNotTrusted, "the signed certificate does not chain to the given CA as a client certificate", err)
	}
	return cert, nil
}

// SharesCertificate reports whether two PEM bundles hold at least one certificate in
// common (the same DER bytes).
func SharesCertificate(a, b []byte) bool {
	seen := map[string]bool{}
	for rest := a; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			seen[string(block.Bytes)] = true
		}
	}
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" && seen[string(block.Bytes)] {
			return true
		}
	}
}
