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
	// ReasonAPIServerUnknown: the provider does not know the API server URL and CA to hand
	// to consumers.
	ReasonAPIServerUnknown = "APIServerUnknown"
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

// Reasons of the Tenant's Ready condition, of the provider's Events on a Tenant and of the
// approval of its certificate request.
const (
	ReasonPending = "Pending"
	ReasonReady   = "Ready"
	// ReasonStatusTampered is the Warning Event of a Tenant whose status published what
	// this provider did not.
	ReasonStatusTampered = "StatusTampered"
	// ReasonPeerGone is the Event of a Tenant deleted because its consumer is gone.
	ReasonPeerGone = "PeerGone"
	// ReasonSliceDeletedDrained is the Event of a Tenant one of whose slices was deleted
	// because the tenant is Drained.
	ReasonSliceDeletedDrained = "ResourceSliceDeleted"
	// ReasonLiqoHandshakeAccepted and ReasonLiqoResourceSliceAccepted are the reasons of
	// the approval of a Tenant's and a slice's CertificateSigningRequest.
	ReasonLiqoHandshakeAccepted     = "LiqoHandshakeAccepted"
	ReasonLiqoResourceSliceAccepted = "LiqoResourceSliceAccepted"
	// ReasonLiqoPeeringUser is the reason of the approval of a peering user's request.
	ReasonLiqoPeeringUser = "LiqoPeeringUser"
)

// Reasons of the Events on the nonce Secrets.
const (
	ReasonNonceGenerated    = "NonceGenerated"
	ReasonNonceSecretTooOld = "NonceSecretTooOld"
	ReasonNonceSigned       = "NonceSigned"
)

// Reasons of an Identity's Ready condition (ReasonInvalidClusterID too) and of the
// consumer's Events on it.
const (
	ReasonKubeconfigReady            = "KubeconfigReady"
	ReasonIdentityMisplaced          = "IdentityNotInTenantNamespace"
	ReasonIdentityNameMismatch       = "IdentityNameMismatch"
	ReasonIdentityLabelMismatch      = "IdentityLabelMismatch"
	ReasonIdentityTypeUnsupported    = "UnsupportedIdentityType"
	ReasonRemoteNamespaceMissing     = "RemoteNamespaceMissing"
	ReasonKubeconfigSecretNotOwned   = "KubeconfigSecretNotOwned"
	ReasonIdentityCertificateExpired = "CertificateExpired"
	// Reasons of the Events of the renewal follower (ReasonCertificateRenewed too).
	ReasonRenewalRefused     = "RenewedCertificateRefused"
	ReasonProviderUnreadable = "ProviderTenantUnreadable"
	ReasonKubeconfigRefused  = "KubeconfigRefused"
)

// Reasons of the Events on a namespace labelled as a tenant namespace.
const (
	ReasonTenantNamespaceDesignated    = "TenantNamespaceDesignated"
	ReasonTenantNamespaceNotDesignated = "TenantNamespaceNotDesignated"
)

// Reasons of the consumer's Events on a ResourceSlice it asks for.
const (
	ReasonSliceMisplaced       = "ResourceSliceNotInTenantNamespace"
	ReasonNoControlPlane       = "ControlPlaneIdentityMissing"
	ReasonProviderUnreachable  = "ProviderUnreachable"
	ReasonSliceDecided         = "ResourceSliceDecided"
	ReasonSliceIdentityApplied = "ResourceSliceIdentityApplied"
	// ReasonSliceCertificateRefused: the provider's answer carries a certificate this
	// cluster does not take (not issued by the pinned CA to the slice's user for its key).
	ReasonSliceCertificateRefused = "ResourceSliceCertificateRefused"
	// ReasonSliceCopyHeld: the slice is let go while its copy on the provider stays, being
	// deleted and granting nothing (the provider's finalize is done), held there by
	// finalizers of someone else's, which the provider's administrator removes.
	ReasonSliceCopyHeld = "ResourceSliceCopyHeld"
	// ReasonSliceNameTaken: a slice of that name in the provider's tenant namespace is not
	// a copy (the provider's own request of this cluster, in a two-way peering): nothing is
	// written to it; the slice is asked for under another name.
	ReasonSliceNameTaken = "ResourceSliceNameTaken"
	// ReasonSliceTooMany: this cluster keeps the copies of so many slices on the provider
	// that no more is made (consumerslice.MaxSliceCopies).
	ReasonSliceTooMany = "TooManyResourceSlices"
)

// Reasons of the provider's Events on a Renew.
const (
	ReasonRenewMisplaced   = "RenewNotInTenantNamespace"
	ReasonRenewUnsupported = "RenewIdentityTypeUnsupported"
	ReasonRenewNoTenant    = "RenewTenantNotAccepted"
	ReasonRenewKeyMismatch = "RenewKeyMismatch"
	ReasonRenewAnswered    = "RenewAnswered"
)

// Reasons of the provider's Events on the key-rotation Renew (wire.KeyRotationRenewName)
// and, for the acceptance of a recorded rotation and a re-seal, on the Tenant. Each refusal
// changes nothing; they are listed in the order the provider checks them.
const (
	// ReasonKeyRotationMisplaced: the Renew is not in the tenant namespace this cluster
	// recorded for its spec.consumerClusterID, or names another identity than the
	// control plane's.
	ReasonKeyRotationMisplaced = "KeyRotationMisplaced"
	// ReasonKeyRotationTenantNotAccepted: the Tenant there carries no acceptance sealed by
	// this provider, or is Drained.
	ReasonKeyRotationTenantNotAccepted = "KeyRotationTenantNotAccepted"
	// ReasonKeyRotationFromMismatch: the key the Renew moves from is not the sealed one.
	ReasonKeyRotationFromMismatch = "KeyRotationFromMismatch"
	// ReasonKeyRotationOldSignatureInvalid: the request is not signed by the sealed key.
	ReasonKeyRotationOldSignatureInvalid = "KeyRotationOldSignatureInvalid"
	// ReasonKeyRotationNewKeyInvalid: the new key does not parse, is not of an allowed
	// type, or is the old one.
	ReasonKeyRotationNewKeyInvalid = "KeyRotationNewKeyInvalid"
	// ReasonKeyRotationCSRInvalid: the CSR is not a key-bound request of the new key.
	ReasonKeyRotationCSRInvalid = "KeyRotationCSRInvalid"
	// ReasonKeyRotationNewSignatureInvalid: the request is not signed by the new key.
	ReasonKeyRotationNewSignatureInvalid = "KeyRotationNewSignatureInvalid"
	// ReasonKeyRotationConflict: the record holds another rotation of this consumer that is
	// not done.
	ReasonKeyRotationConflict = "KeyRotationConflict"
	// ReasonKeyRotationRecorded: the proven rotation is recorded and the Tenant's spec moved
	// to the new key.
	ReasonKeyRotationRecorded = "KeyRotationRecorded"
	// ReasonKeyRotationAnswered: the Renew's status holds the certificate of the new key.
	ReasonKeyRotationAnswered = "KeyRotationAnswered"
	// ReasonKeyRotationDoneSignatureInvalid: the end of the rotation is not signed by the
	// new key.
	ReasonKeyRotationDoneSignatureInvalid = "KeyRotationDoneSignatureInvalid"
	// ReasonKeyRotationDone: the old subject lost its bindings and SubjectAccessReviews
	// prove it may do none of the tenant's rules.
	ReasonKeyRotationDone = "KeyRotationDone"
	// ReasonKeyRotationOldSubjectAllowed: the rotation is done but SubjectAccessReviews
	// still allow the old subject something.
	ReasonKeyRotationOldSubjectAllowed = "KeyRotationOldSubjectStillAllowed"
	// ReasonKeyRotationAccepted: the Tenant's spec moved to the key of a recorded rotation,
	// sealed again for it (the Tenant's Authenticated condition).
	ReasonKeyRotationAccepted = "KeyRotationAccepted"
	// ReasonResealed: the acceptance was sealed again with this provider's current key
	// after a rotation of its own key (Authenticated condition).
	ReasonResealed = "ResealedWithCurrentKey"
)

// Reasons of a Peering's Ready condition (and of its Events): where the declared peering
// stands, and, when it is stuck, what to do.
const (
	ReasonPeered                     = "Peered"
	ReasonPeeringAuthenticating      = "Authenticating"
	ReasonBootstrapSecretMissing     = "BootstrapSecretMissing"
	ReasonBootstrapCredentialInvalid = "BootstrapCredentialInvalid"
	ReasonBootstrapCredentialRefused = "BootstrapCredentialRefused"
	ReasonBootstrapExpired           = "BootstrapExpired"
	ReasonBootstrapConsumed          = "BootstrapConsumed"
	ReasonProviderMismatch           = "ProviderMismatch"
	ReasonProviderCAMismatch         = "ProviderCAMismatch"
	ReasonProviderPeeredElsewhere    = "ProviderPeeredByAnotherPeering"
	ReasonProviderAlreadyPeered      = "ProviderAlreadyPeered"
	ReasonPeeringWaitingForApproval  = "WaitingForApproval"
	ReasonPeeringDenied              = "DeniedByProvider"
	ReasonHandshakeFailed            = "HandshakeFailed"
	ReasonPeeringLeaving             = "Leaving"
	ReasonPeeringLeaveFailed         = "LeaveFailed"
	ReasonPeeringIdentityNotReady    = "IdentityNotReady"
	ReasonBootstrapRetired           = "Retired"
	ReasonBootstrapNotRetired        = "NotRetired"
	ReasonBootstrapRetirePending     = "NotYetUsed"
	ReasonPeeringSlicesAccepted      = "SlicesAccepted"
	ReasonPeeringSlicesPending       = "SlicesPending"
	ReasonPeeringSliceDenied         = "SliceDenied"
	ReasonPeeringNoSlices            = "NoSlices"
)

// Reasons of the Events a Peering records for each step of its handshake.
const (
	ReasonPeeringStep    = "HandshakeStep"
	ReasonPeeringWarning = "HandshakeWarning"
	// ReasonPeeringPinned is the Event of a Peering whose peering, made before the
	// consumer pinned its tenant namespace on the provider and its proxy, is pinned now.
	ReasonPeeringPinned = "PeeringPinned"
)

// ConditionApproved is a Tenant condition on a provider whose administrator requires the
// approval of new consumers (liqoctl install --require-approval), or that decided about
// the Tenant's key: True once the key the handshake sealed is approved, False while it
// waits (ReasonApprovalPending) or when it was denied (ReasonApprovalDenied). The
// decision is read from the tenant record, never from this condition.
const ConditionApproved = "Approved"

// Reasons of the Tenant's Approved condition; ReasonApprovalPending and
// ReasonApprovalDenied are also those of its CertificateIssued and AccessGranted
// conditions while no certificate is issued for that reason.
const (
	// ReasonApprovalPending: the administrator has not decided about the sealed key yet.
	ReasonApprovalPending = "ApprovalPending"
	// ReasonApprovalDenied: the administrator denied the sealed key (liqoctl deny tenant).
	ReasonApprovalDenied = "Denied"
	// ReasonApproved: the administrator approved the sealed key (liqoctl approve tenant).
	ReasonApproved = "Approved"
	// ReasonApprovedHoldingCertificate: the Tenant already published a certificate this
	// provider issued for the sealed key when approval became required: it is not cut off.
	ReasonApprovedHoldingCertificate = "HeldACertificate"
)
