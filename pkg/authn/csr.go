package authn

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// MaxCSRSize bounds a CSR given by another cluster; larger ones are refused unparsed.
const MaxCSRSize = 8 << 10

// PEMTypeCSR is the PEM block type of a certificate signing request.
const PEMTypeCSR = "CERTIFICATE REQUEST"

var (
	oidCommonName       = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization     = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidExtensionRequest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 14}
)

// ForgeCSR builds the control-plane CSR of a cluster: subject CN=<clusterID>, O=liqo.io,
// signed with the cluster key, without extensions. It returns PEM.
func ForgeCSR(key crypto.Signer, clusterID string) ([]byte, error) {
	return ForgeCSRFor(key, clusterID, wire.UserGroup)
}

// ForgeCSRFor builds a CSR for subject CN=cn, O=org, signed with key, without extensions
// (a resource slice's identity: CN=SliceUserName, O=<consumer cluster ID>). It returns PEM.
func ForgeCSRFor(key crypto.Signer, cn, org string) ([]byte, error) {
	return forgeCSR(key, cn, []string{org})
}

func forgeCSR(key crypto.Signer, cn string, orgs []string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("creating the certificate signing request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypeCSR, Bytes: der}), nil
}

// ValidateCSR applies every provider-side rule to a tenant's CSR: size bound, exactly one
// PEM block and nothing after it, a valid self-signature, the tenant's own public key,
// CN equal to the tenant's cluster ID, Organization exactly ["liqo.io"] (or ["liqo.io",
// KeyGroup of that CN and the CSR's own key]: a key-bound identity), no other subject
// attribute, no subject alternative names, no extensions or attributes at all.
func ValidateCSR(data []byte, pub crypto.PublicKey, clusterID string) (*x509.CertificateRequest, error) {
	return ValidateCSRFor(data, pub, clusterID, wire.UserGroup)
}

// ValidateCSRFor is ValidateCSR for subject CN=cn, O=org (or O=[org, KeyGroup(cn, key)]):
// a resource slice's CSR. A nil
// pub skips the key check (a Tenant whose authzPolicy is TolerateNoHandshake); every other
// rule holds.
func ValidateCSRFor(data []byte, pub crypto.PublicKey, cn, org string) (*x509.CertificateRequest, error) {
	block, err := decodeCSRPEM(data)
	if err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonCSRMalformed, "the CSR cannot be parsed", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, refuse(ReasonCSRSelfSignatureInvalid, "the CSR self-signature does not verify", err)
	}
	if pub != nil && !PublicKeysEqual(csr.PublicKey, pub) {
		return nil, refuse(ReasonCSRKeyMismatch, "the CSR is for a different key than the tenant's public key", nil)
	}
	if err := checkCSRSubject(csr, cn, org); err != nil {
		return nil, err
	}
	if err := checkCSRRequestsNothingElse(csr); err != nil {
		return nil, err
	}
	return csr, nil
}

// decodeCSRPEM is the envelope half of ValidateCSRFor, checked before any DER is parsed:
// the size bound, then exactly one CERTIFICATE REQUEST block without headers and nothing
// after it. Each refusal keeps the reason it had inline.
func decodeCSRPEM(data []byte) (*pem.Block, error) {
	if len(data) > MaxCSRSize {
		return nil, refuse(ReasonCSRTooLarge, fmt.Sprintf("the CSR is %d bytes, more than the %d allowed", len(data), MaxCSRSize), nil)
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, refuse(ReasonCSRNotPEM, "the CSR is not PEM encoded", nil)
	}
	if block.Type != PEMTypeCSR || len(block.Headers) != 0 {
		return nil, refuse(ReasonCSRNotPEM, fmt.Sprintf("the CSR PEM block is %q with %d headers, want %q without headers", block.Type, len(block.Headers), PEMTypeCSR), nil)
	}
	if extra := strings.TrimSpace(string(rest)); extra != "" {
		if next, _ := pem.Decode([]byte(extra)); next != nil {
			return nil, refuse(ReasonCSRMultipleBlocks, "the CSR holds more than one PEM block", nil)
		}
		return nil, refuse(ReasonCSRTrailingData, fmt.Sprintf("the CSR has %d bytes of data after its PEM block", len(extra)), nil)
	}
	return block, nil
}

// checkCSRRequestsNothingElse is the last step of ValidateCSRFor, after the subject: a
// control-plane CSR asks for no subject alternative names, no extensions and no
// attributes (an empty extension request excepted), checked in that order.
func checkCSRRequestsNothingElse(csr *x509.CertificateRequest) error {
	if n := len(csr.DNSNames) + len(csr.IPAddresses) + len(csr.EmailAddresses) + len(csr.URIs); n > 0 {
		return refuse(ReasonCSRSubjectAltNames, fmt.Sprintf("the CSR requests %d subject alternative names; a control-plane CSR has none", n), nil)
	}
	if len(csr.Extensions) > 0 {
		return refuse(ReasonCSRExtensions, fmt.Sprintf("the CSR requests %d extensions (first %s); a control-plane CSR has none", len(csr.Extensions), csr.Extensions[0].Id), nil)
	}
	for _, attr := range csr.Attributes { //nolint:staticcheck // the deprecated field is the only view of raw attributes
		if !attr.Type.Equal(oidExtensionRequest) || len(attr.Value) > 0 && len(attr.Value[0]) > 0 {
			return refuse(ReasonCSRAttributes, fmt.Sprintf("the CSR carries attribute %s; a control-plane CSR has none", attr.Type), nil)
		}
	}
	return nil
}

func checkCSRSubject(csr *x509.CertificateRequest, cn, org string) error {
	if csr.Subject.CommonName != cn || countOID(csr.Subject.Names, oidCommonName) != 1 {
		return refuse(ReasonCSRCommonNameMismatch, fmt.Sprintf("the CSR common name is %q, it must be exactly %q", csr.Subject.CommonName, cn), nil)
	}
	if !organizationAllowed(csr.Subject.Organization, cn, org, csr.PublicKey) || countOID(csr.Subject.Names, oidOrganization) != len(csr.Subject.Organization) {
		return refuse(ReasonCSROrganizationMismatch, fmt.Sprintf("the CSR organization is %q, it must be exactly [%q] or [%q, the key group of its common name and key]", csr.Subject.Organization, org, org), nil)
	}
	for _, n := range csr.Subject.Names {
		if !n.Type.Equal(oidCommonName) && !n.Type.Equal(oidOrganization) {
			return refuse(ReasonCSRExtraSubject, fmt.Sprintf("the CSR subject carries attribute %s; only CN and O are allowed", n.Type), nil)
		}
	}
	return nil
}

func countOID(names []pkix.AttributeTypeAndValue, oid asn1.ObjectIdentifier) int {
	n := 0
	for _, name := range names {
		if name.Type.Equal(oid) {
			n++
		}
	}
	return n
}

// SliceUserName is the user of a resource slice's identity, as Liqo names it: the slice
// name, a dash, and the first 6 bytes of the SHA-256 of the consumer's cluster ID in hex.
func SliceUserName(slice, consumerID string) string {
	sum := sha256.Sum256([]byte(consumerID))
	return slice + "-" + hex.EncodeToString(sum[:6])
}
