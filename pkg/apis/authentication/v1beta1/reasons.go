package v1beta1

// ConditionCSRIntegrity is a Tenant condition: False while CertificateSigningRequests
// that liqo-auth did not create carry the Tenant's labels (they are never approved).
const ConditionCSRIntegrity = "CSRIntegrity"

// Reasons of the Tenant's Authenticated condition, also used for its Warning Events: why a
// handshake was accepted or refused, beyond the cryptographic refusals of pkg/authn.
const (
	ReasonHandshakeAccepted     = "HandshakeAccepted"
	ReasonInvalidClusterID      = "InvalidClusterID"
	ReasonTenantNameMismatch    = "TenantNameMismatch"
	ReasonTenantLabelMismatch   = "TenantLabelMismatch"
	ReasonTenantMisplaced       = "TenantNotInTenantNamespace"
	ReasonNonceMissing          = "NonceMissing"
	ReasonNonceExpired          = "NonceExpired"
	ReasonNonceInvalid          = "NonceInvalid"
	ReasonNonceIssueTimeInvalid = "NonceIssueTimeInvalid"
	ReasonNonceConsumed         = "NonceConsumed"
	ReasonHandshakeChanged      = "HandshakeChanged"
	ReasonSignatureMissing      = "SignatureMissing"
	ReasonPublicKeyMissing      = "PublicKeyMissing"
	ReasonCSRMissing            = "CSRMissing"
	// ReasonClusterIDIsSliceUser refuses a consumer whose cluster ID is the user name of a
	// ResourceSlice identity this provider issued: its control-plane grants would be the
	// slice identity's too.
	ReasonClusterIDIsSliceUser = "ClusterIDIsSliceUser"
)

// Reasons of the Tenant's CertificateIssued condition.
const (
	ReasonCertificatePending      = "CertificatePending"
	ReasonApprovedNotIssued       = "ApprovedNotIssued"
	ReasonCSRDenied               = "CSRDenied"
	ReasonCSRFailed               = "CSRFailed"
	ReasonCertificateIssued       = "CertificateIssued"
	ReasonCertificateRenewed      = "CertificateRenewed"
	ReasonCordonedNoCertificate   = "Cordoned"
	ReasonDrainedNoCertificate    = "Drained"
	ReasonIssuedCertificateBroken = "IssuedCertificateInvalid"
	ReasonSubmissionRefused       = "CertificateRequestRefused"
	ReasonClusterIDHasPermissions = "ClusterIDHasPermissions"
)

// Reasons of the Tenant's AccessGranted condition.
const (
	ReasonAccessGranted      = "AccessGranted"
	ReasonAccessRevoked      = "AccessRevoked"
	ReasonAccessStillAllowed = "AccessStillAllowed"
	ReasonCordonedNoGrant    = "CordonedNotGranted"
)

// Reasons of the Tenant's CSRIntegrity condition.
const (
	ReasonForeignCSR  = "ForeignCertificateSigningRequest"
	ReasonOnlyOwnCSRs = "OnlyOwnCertificateSigningRequests"
)
