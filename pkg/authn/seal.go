package authn

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Acceptance is what a provider records when it accepts a Tenant's handshake: which
// Tenant object, for which cluster, with which key and which certificate request.
type Acceptance struct {
	TenantUID      string
	ClusterID      string
	KeyFingerprint string
	CSRDigest      string
}

// sealDomain starts every sealed message. It contains a newline, so that no sealed message
// is ever a canonical nonce: a seal can never pass for a nonce signature, nor the other way.
const sealDomain = "liqo-auth tenant-acceptance v1\n"

// message is what is sealed: the fields one per line. A field holding a line break would
// make two acceptances one message, so none is sealed or verified (the CRD and the
// protocol's rules keep every field to one line already; this does not rely on them).
func (a Acceptance) message() ([]byte, bool) {
	fields := []string{a.TenantUID, a.ClusterID, a.KeyFingerprint, a.CSRDigest}
	for _, f := range fields {
		if strings.ContainsAny(f, "\n\r") {
			return nil, false
		}
	}
	return []byte(sealDomain + strings.Join(fields, "\n")), true
}

// SealAcceptance signs an acceptance with the provider's cluster key. The seal is kept in
// the Tenant's status: whoever may write that status (but does not hold the key) cannot
// make the provider take a handshake it never verified for an accepted one.
func SealAcceptance(key crypto.Signer, a Acceptance) ([]byte, error) {
	msg, ok := a.message()
	if !ok {
		return nil, refuse(ReasonAcceptanceSealInvalid, "an acceptance field holds a line break: nothing is sealed", nil)
	}
	return sign(key, msg)
}

// VerifyAcceptanceSeal checks that seal is the provider's seal of exactly a.
func VerifyAcceptanceSeal(pub crypto.PublicKey, a Acceptance, seal []byte) error {
	msg, ok := a.message()
	if !ok || len(seal) == 0 || len(seal) > MaxSignatureSize || !verify(pub, msg, seal) {
		return refuse(ReasonAcceptanceSealInvalid, "the recorded acceptance is not sealed by this provider's key for this Tenant, key and CSR: it was not written by liqo-auth", nil)
	}
	return nil
}

// CSRDigest is the digest of a certificate request (PEM) an Acceptance names: SHA-256, in
// hex.
func CSRDigest(csr []byte) string {
	sum := sha256.Sum256(csr)
	return hex.EncodeToString(sum[:])
}
