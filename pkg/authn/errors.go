package authn

import "errors"

// Reason is a stable, machine-readable cause of a refusal. Controllers use it verbatim as
// the reason of Warning Events and status conditions.
type Reason string

// Reasons for refusing handshake inputs.
const (
	ReasonNonceNotCanonical            Reason = "NonceNotCanonical"
	ReasonPublicKeyInvalid             Reason = "PublicKeyInvalid"
	ReasonPublicKeyTypeNotAllowed      Reason = "PublicKeyTypeNotAllowed"
	ReasonPrivateKeyInvalid            Reason = "PrivateKeyInvalid"
	ReasonSignatureInvalid             Reason = "SignatureInvalid"
	ReasonCSRTooLarge                  Reason = "CSRTooLarge"
	ReasonCSRNotPEM                    Reason = "CSRNotPEM"
	ReasonCSRMultipleBlocks            Reason = "CSRMultiplePEMBlocks"
	ReasonCSRTrailingData              Reason = "CSRTrailingData"
	ReasonCSRMalformed                 Reason = "CSRMalformed"
	ReasonCSRSelfSignatureInvalid      Reason = "CSRSelfSignatureInvalid"
	ReasonCSRKeyMismatch               Reason = "CSRKeyMismatch"
	ReasonCSRCommonNameMismatch        Reason = "CSRCommonNameMismatch"
	ReasonCSROrganizationMismatch      Reason = "CSROrganizationMismatch"
	ReasonCSRExtraSubject              Reason = "CSRExtraSubjectAttributes"
	ReasonCSRSubjectAltNames           Reason = "CSRHasSubjectAltNames"
	ReasonCSRExtensions                Reason = "CSRHasExtensions"
	ReasonCSRAttributes                Reason = "CSRHasAttributes"
	ReasonCertificateInvalid           Reason = "CertificateInvalid"
	ReasonCertificateKeyMismatch       Reason = "CertificateKeyMismatch"
	ReasonCertificateNotTrusted        Reason = "CertificateNotSignedByCA"
	ReasonCertificateExpired           Reason = "CertificateExpired"
	ReasonCertificateSubject           Reason = "CertificateSubjectMismatch"
	ReasonCAInvalid                    Reason = "CAInvalid"
	ReasonCAFingerprintMismatch        Reason = "CAFingerprintMismatch"
	ReasonServerURLInvalid             Reason = "APIServerURLInvalid"
	ReasonProxyURLInvalid              Reason = "ProxyURLInvalid"
	ReasonProxyNotPinned               Reason = "ProxyNotPinned"
	ReasonTenantNamespaceNotPinned     Reason = "TenantNamespaceNotPinned"
	ReasonKubeconfigInvalid            Reason = "KubeconfigInvalid"
	ReasonKubeconfigForeignCredentials Reason = "KubeconfigForeignCredentials"
	ReasonAcceptanceSealInvalid        Reason = "AcceptanceSealInvalid"
	ReasonUnsupportedSigningMethod     Reason = "UnsupportedSigningKey"
	ReasonRotationProofInvalid         Reason = "KeyRotationProofInvalid"
)

// Error is a refusal of untrusted input: a Reason for machines and a message that tells a
// cluster administrator what is wrong.
type Error struct {
	Reason  Reason
	Message string
	Err     error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of the first *Error in err's chain, or "" if there is none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func refuse(reason Reason, msg string, cause error) *Error {
	return &Error{Reason: reason, Message: msg, Err: cause}
}
