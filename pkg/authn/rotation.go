package authn

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// KeyGroup is the group that names one identity's key: user, then the key's fingerprint.
// A certificate for a key-bound identity carries it as its second Organization, and the
// provider binds this group instead of the user, so that a certificate of the same user
// for any other key (the one a rotation replaced) authorizes nothing. A provider signs a
// CSR carrying a key group only when the group is the one of the CSR's own key and
// common name: nobody chooses it.
func KeyGroup(user string, pub crypto.PublicKey) (string, error) {
	fp, err := Fingerprint(pub)
	if err != nil {
		return "", err
	}
	return wire.KeyGroupPrefix + user + ":" + fp, nil
}

// IsKeyGroup says whether group has the shape of a key group (KeyGroup).
func IsKeyGroup(group string) bool { return strings.HasPrefix(group, wire.KeyGroupPrefix) }

// ForgeKeyBoundCSRFor builds a CSR for subject CN=cn, O=[org, KeyGroup(cn, key)], signed
// with key, without extensions: the CSR of a key-bound identity. It returns PEM.
func ForgeKeyBoundCSRFor(key crypto.Signer, cn, org string) ([]byte, error) {
	group, err := KeyGroup(cn, key.Public())
	if err != nil {
		return nil, err
	}
	return forgeCSR(key, cn, []string{org, group})
}

// CSRKeyGroup is the key group a validated CSR carries ("" when it carries none).
func CSRKeyGroup(csr *x509.CertificateRequest) string {
	return keyGroupOf(csr.Subject.Organization)
}

// keyGroupOf is the key group among two Organizations (their order is the encoder's: a
// multi-valued RDN is a DER SET, sorted), "" when there is none.
func keyGroupOf(orgs []string) string {
	if len(orgs) != 2 {
		return ""
	}
	for _, o := range orgs {
		if IsKeyGroup(o) {
			return o
		}
	}
	return ""
}

// CertificateKeyGroup is the key group a certificate carries as its second Organization
// ("" when it carries none).
func CertificateKeyGroup(cert *x509.Certificate) string {
	return keyGroupOf(cert.Subject.Organization)
}

// organizationAllowed says whether orgs is what an identity of user cn with key pub may
// carry: exactly [org] (Liqo's form, bound by user), or org and KeyGroup(cn, pub) in
// either order (bound by its key).
func organizationAllowed(orgs []string, cn, org string, pub crypto.PublicKey) bool {
	switch len(orgs) {
	case 1:
		return orgs[0] == org
	case 2:
		group, err := KeyGroup(cn, pub)
		return err == nil && (orgs[0] == org && orgs[1] == group || orgs[0] == group && orgs[1] == org)
	default:
		return false
	}
}

// Rotation is what a consumer states when it moves its identity on a provider from one
// cluster key to the next: which consumer, to which provider, over which Tenant, from
// which key to which, with which certificate request for the new key. The consumer signs
// it with both keys (SignRotation): the old one proves the request comes from the
// identity being moved, the new one that the consumer holds the key it moves to.
type Rotation struct {
	ConsumerID, ProviderID, TenantUID string
	// From and To are the fingerprints of the old and the new key.
	From, To string
	// CSRDigest is the CSRDigest of the new key's CSR.
	CSRDigest string
}

// rotationDomain and rotationDoneDomain start the two rotation statements. Each contains
// a newline (no canonical nonce does) and differs from the other and from sealDomain, so
// that no signature made for one purpose passes for another.
const (
	rotationDomain     = "liqo-auth key-rotation v1\n"
	rotationDoneDomain = "liqo-auth key-rotation-done v1\n"
)

func (r Rotation) message(domain string) ([]byte, bool) {
	fields := []string{r.ConsumerID, r.ProviderID, r.TenantUID, r.From, r.To, r.CSRDigest}
	for _, f := range fields {
		if f == "" || strings.ContainsAny(f, "\n\r") {
			return nil, false
		}
	}
	return []byte(domain + strings.Join(fields, "\n")), true
}

// SignRotation signs the rotation request r with key (the consumer signs it once with
// each of its two keys).
func SignRotation(key crypto.Signer, r Rotation) ([]byte, error) {
	return signStatement(key, r, rotationDomain)
}

// VerifyRotation checks that sig is pub's signature of the rotation request r.
func VerifyRotation(pub crypto.PublicKey, r Rotation, sig []byte) error {
	return verifyStatement(pub, r, rotationDomain, sig, "the key-rotation request")
}

// SignRotationDone signs, with the new key, that the consumer has taken the certificate
// of its new key and the provider may stop honouring the old one.
func SignRotationDone(key crypto.Signer, r Rotation) ([]byte, error) {
	return signStatement(key, r, rotationDoneDomain)
}

// VerifyRotationDone checks that sig is pub's signature of the end of rotation r.
func VerifyRotationDone(pub crypto.PublicKey, r Rotation, sig []byte) error {
	return verifyStatement(pub, r, rotationDoneDomain, sig, "the end of the key rotation")
}

func signStatement(key crypto.Signer, r Rotation, domain string) ([]byte, error) {
	msg, ok := r.message(domain)
	if !ok {
		return nil, refuse(ReasonRotationProofInvalid, "a key-rotation field is empty or holds a line break: nothing is signed", nil)
	}
	return sign(key, msg)
}

func verifyStatement(pub crypto.PublicKey, r Rotation, domain string, sig []byte, what string) error {
	msg, ok := r.message(domain)
	if !ok || len(sig) == 0 || len(sig) > MaxSignatureSize || !verify(pub, msg, sig) {
		return refuse(ReasonRotationProofInvalid, fmt.Sprintf("%s is not signed by the key it must be signed with, for this consumer, provider, Tenant, keys and CSR", what), nil)
	}
	return nil
}
