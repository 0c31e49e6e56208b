package authn

import (
	"crypto"
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

func (a Acceptance) message() []byte {
	return []byte(sealDomain + strings.Join([]string{a.TenantUID, a.ClusterID, a.KeyFingerprint, a.CSRDigest}, "\n"))
}

// SealAcceptance signs an acceptance with the provider's cluster key. The seal is kept in
// the Tenant's status: whoever may write that status (but does not hold the key) cannot
// make the provider take a handshake it never verified for an accepted one.
func SealAcceptance(key crypto.Signer, a Acceptance) ([]byte, error) {
	return sign(key, a.message())
}

// VerifyAcceptanceSeal checks that seal is the provider's seal of exactly a.
func VerifyAcceptanceSeal(pub crypto.PublicKey, a Acceptance, seal []byte) error {
	if len(seal) == 0 || len(seal) > MaxSignatureSize || !verify(pub, a.message(), seal) {
		return refuse(ReasonAcceptanceSealInvalid, "the recorded acceptance is not sealed by this provider's key for this Tenant, key and CSR: it was not written by liqo-auth", nil)
	}
	return nil
}
