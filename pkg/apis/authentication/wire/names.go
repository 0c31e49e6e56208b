package wire

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Names, labels and keys of the protocol (see docs/protocol.md).
const (
	// DefaultLiqoNamespace is where a cluster keeps its own identity.
	DefaultLiqoNamespace = "liqo"

	ClusterIDConfigMapName = "liqo-clusterid-configmap"
	ClusterIDKey           = "CLUSTER_ID"
	ClusterIDLabelKey      = "app.kubernetes.io/name"
	ClusterIDLabelValue    = "clusterid-configmap"

	KeysSecretName  = "authentication-keys"
	PrivateKeyField = "privateKey"
	PublicKeyField  = "publicKey"
	// NextPrivateKeyField and NextPublicKeyField hold the key a rotation staged (liqo-auth
	// only; Liqo reads the two fields above). PreviousPrivateKeyField and
	// PreviousPublicKeyField hold the key a rotation switched away from, until every peer
	// has moved and it is retired.
	NextPrivateKeyField     = "nextPrivateKey"
	NextPublicKeyField      = "nextPublicKey"
	PreviousPrivateKeyField = "previousPrivateKey"
	PreviousPublicKeyField  = "previousPublicKey"
	// KeyGroupPrefix starts every key group: KeyGroupPrefix + user + ":" + key fingerprint,
	// the second Organization of a key-bound certificate, bound instead of its user.
	KeyGroupPrefix = "liqo-auth.io:key:"

	// KeyRotationRenewName is the Renew, in the provider's tenant namespace of a consumer,
	// by which the consumer moves its identity to its next key (docs/protocol.md): not a
	// renewal, which Renews of other names are.
	KeyRotationRenewName = "liqo-auth-key-rotation"
	// RotationFromAnnotation, on the key-rotation Renew, is the fingerprint of the key the
	// identity moves from.
	RotationFromAnnotation = "liqo-auth.io/rotation-from"
	// RotationOldSignatureAnnotation and RotationNewSignatureAnnotation are the rotation
	// request (authn.SignRotation) signed by the old and by the new key, base64 (standard).
	RotationOldSignatureAnnotation = "liqo-auth.io/rotation-old-signature"
	RotationNewSignatureAnnotation = "liqo-auth.io/rotation-new-signature"
	// RotationDoneSignatureAnnotation is the end of the rotation (authn.SignRotationDone)
	// signed by the new key, base64 (standard): the consumer holds the new certificate.
	RotationDoneSignatureAnnotation = "liqo-auth.io/rotation-done-signature"

	RemoteClusterIDLabel  = "liqo.io/remote-cluster-id"
	TenantNamespaceLabel  = "liqo.io/tenant-namespace"
	TenantNamespacePrefix = "liqo-tenant-"

	NonceSecretName = "liqo-nonce"
	NonceLabel      = "liqo.io/nonce"
	NonceField      = "nonce"
	// NonceIssuedAtAnnotation records when a provider filled a nonce (RFC 3339).
	NonceIssuedAtAnnotation = "liqo.io/nonce-issued-at"
	// NonceConsumedAtAnnotation is what providers before the tenant record's consumedNonce
	// was read everywhere wrote on a nonce they accepted a handshake with (RFC 3339).
	// Nothing reads it: the record makes a nonce single-use. A peering user's nonce may
	// still carry it.
	NonceConsumedAtAnnotation = "liqo.io/nonce-consumed-at"

	SignedNonceSecretName = "liqo-signed-nonce"
	SignedNonceLabel      = "liqo.io/signed-nonce"
	SignedNonceField      = "signedNonce"

	// Labels Liqo's replicator puts on the copy of an object in the other cluster; a Liqo
	// provider answers a Renew that carries them.
	ReplicationRequestedLabel = "liqo.io/replication"
	ReplicationStatusLabel    = "liqo.io/replicated"
	ReplicationOriginLabel    = "liqo.io/originID"

	// PeeringLabel, on a consumer's ResourceSlice, names the Peering (in the Liqo
	// namespace) that asks for it.
	PeeringLabel = "liqo.io/peering"

	IdentityTypeLabel               = "liqo.io/identity-type"
	RemoteTenantNamespaceAnnotation = "liqo.io/remote-tenant-namespace"
	KubeconfigField                 = "kubeconfig"

	// ControlPlaneRoleName is the ClusterRole bound, in its tenant namespace, to a
	// consumer's control-plane user.
	ControlPlaneRoleName = "liqo-remote-controlplane"
	// ControlPlaneBindingName is the RoleBinding of that role in a tenant namespace.
	ControlPlaneBindingName = "liqo-remote-controlplane"
	// TenantReaderName is the Role and RoleBinding that let a consumer read its own Tenant
	// (to pick up renewed certificates).
	TenantReaderName = "liqo-tenant-reader"
	// PresenceLeaseName is the Lease, in a consumer's tenant namespace on the provider,
	// that the consumer's manager renews to say it is still there (the provider creates
	// it; the consumer may only renew it).
	PresenceLeaseName = "liqo-consumer-presence"

	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "liqo-auth"
	// TenantUIDLabel links CertificateSigningRequests to the Tenant they are for.
	TenantUIDLabel = "liqo.io/tenant-uid"

	// TenantFinalizer lets the provider clean up what a Tenant caused.
	TenantFinalizer = "liqo.io/tenant-cleanup"
	// SliceNameLabel names, on a slice's Identity, the ResourceSlice it is for.
	SliceNameLabel = "liqo.io/resourceslice-name"
	// SliceAnnotation names the ResourceSlice ("namespace/name") a CSR is for.
	SliceAnnotation = "liqo.io/resourceslice"
	// ProviderSliceFinalizer lets the provider remove what a slice caused (its access and
	// certificate requests); ConsumerSliceFinalizer lets the consumer remove the slice's
	// copy on the provider and its Identity.
	ProviderSliceFinalizer = "liqo.io/resourceslice-provider"
	ConsumerSliceFinalizer = "liqo.io/resourceslice-consumer"

	// UserGroup is the group of every control-plane certificate (its Organization).
	UserGroup = "liqo.io"
)

// TenantNamespaceName is the default tenant namespace for a remote cluster.
func TenantNamespaceName(remoteID string) string { return TenantNamespacePrefix + remoteID }

// IdentityName is the name of the control-plane Identity for a provider.
func IdentityName(providerID string) string { return "controlplane-" + providerID }

// KubeconfigSecretName is the name of the kubeconfig Secret of an Identity.
func KubeconfigSecretName(identityName string) string { return "kubeconfig-" + identityName }

// MaxSliceNameLength is the longest name of a ResourceSlice: its name is a label value on
// the objects it causes (at most 63 characters), and its user <slice>-<12 hex> the
// common name of a certificate.
const MaxSliceNameLength = 50

// ValidateSliceName says why name cannot name a ResourceSlice (nil when it can): a
// DNS-1123 label of at most MaxSliceNameLength characters.
func ValidateSliceName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("the ResourceSlice name %q is not valid: %s", name, errs[0])
	}
	if len(name) > MaxSliceNameLength {
		return fmt.Errorf("the ResourceSlice name %q is %d characters long: at most %d (it names a label value and, with a suffix, a certificate's common name)", name, len(name), MaxSliceNameLength)
	}
	return nil
}

// Labels and annotations this implementation adds (all under liqo.io/, none read by Liqo).
const (
	// TenantAnnotation names the Tenant ("namespace/name") a CSR is for.
	TenantAnnotation = "liqo.io/tenant"
	// ReplacesAnnotation names the serial of the certificate a CSR renews ("" for the first
	// one), so that a reconcile finds the CSR of the issuance it is doing.
	ReplacesAnnotation = "liqo.io/replaces-serial"
	// StrippedAnnotation marks an object the manager's cache keeps without its content: it
	// is not the manager's (a Secret outside the tenant namespaces this cluster recorded, a
	// certificate request someone else made). A controller that needs it reads it live.
	StrippedAnnotation = "liqo.io/cache-stripped"
	// ReplicationDestinationLabel names, on a slice the consumer asks for, the provider it is
	// for (Liqo's replicator's label).
	ReplicationDestinationLabel = "liqo.io/remoteID"
	// CreatedByAnnotation, CreatedByUIDAnnotation, CreatedByGroupsAnnotation and
	// CreatedByExtraAnnotation record, on a namespace created with the tenant labels, the
	// user the API server authenticated as its creator: name, UID, groups and extra
	// (written by the admission policy liqo-auth-namespace-creator, never by a client).
	// Groups and extra are lists whose items may hold any character, so each item is
	// escaped ('%', ',', '=' and ';' as %25, %2C, %3D and %3B) and terminated: groups as
	// "g1,g2,", extra as "key=v1,v2,;key2=;" with keys sorted. Nothing is split on a
	// character an item may contain.
	CreatedByAnnotation       = "liqo.io/created-by"
	CreatedByUIDAnnotation    = "liqo.io/created-by-uid"
	CreatedByGroupsAnnotation = "liqo.io/created-by-groups"
	CreatedByExtraAnnotation  = "liqo.io/created-by-extra"
	// GrantedResourcesAnnotation records, on a slice's Role, the resources the provider
	// granted the slice (JSON). The Role is the provider's own record of the grant: the
	// tenant may write its slices and their status, never a Role.
	GrantedResourcesAnnotation = "liqo.io/granted-resources"
	// PeeringUserLabel on the peering user's roles and bindings names the user.
	PeeringUserLabel = "liqo.io/peering-user"
	// PeeringUserExpiresAnnotation on its tenant-namespace RoleBinding records when its
	// certificate expires (RFC 3339), and PeeringUserSerialAnnotation the serial.
	PeeringUserExpiresAnnotation = "liqo.io/peering-user-expires"
	PeeringUserSerialAnnotation  = "liqo.io/peering-user-serial"
	// TenantRecordLabel marks the ConfigMaps of the Liqo namespace that are tenant records.
	TenantRecordLabel = "liqo.io/tenant-record"
)

// TenantRecordPrefix starts the name of every tenant record (a ConfigMap in the Liqo
// namespace, this implementation's).
const TenantRecordPrefix = "liqo-auth-tenant-"

// TenantRecordName is the name of the record of remoteID in the Liqo namespace.
func TenantRecordName(remoteID string) string { return TenantRecordPrefix + remoteID }

// ProjectLabel says whether key is one of the labels this project reads or writes (every
// constant named *Label here): a cache that keeps of others' objects only this project's
// labels keeps these, and so a bounded number, however many its writer added.
func ProjectLabel(key string) bool {
	switch key {
	case RemoteClusterIDLabel, TenantNamespaceLabel, NonceLabel, SignedNonceLabel,
		ReplicationRequestedLabel, ReplicationStatusLabel, ReplicationOriginLabel, ReplicationDestinationLabel,
		PeeringLabel, IdentityTypeLabel, ManagedByLabel, TenantUIDLabel, SliceNameLabel, PeeringUserLabel,
		TenantRecordLabel, AppNameLabel:
		return true
	}
	return false
}

// ManagedLabels are the labels of every object this project makes.
func ManagedLabels() map[string]string { return map[string]string{ManagedByLabel: ManagedByValue} }

// RotateKeyAnnotation on the authentication-keys Secret asks the manager to rotate the
// cluster key (any token); KeyRotatedAnnotation is set by the manager to the same token
// once the rotation is retired: a rotation is asked while the two differ.
const (
	RotateKeyAnnotation  = "liqo-auth.io/rotate-key"
	KeyRotatedAnnotation = "liqo-auth.io/key-rotated"
)

// Stripped reports whether the manager's cache kept obj without its content
// (StrippedAnnotation): every reader of that cache that needs the content reads it live.
func Stripped(obj interface{ GetAnnotations() map[string]string }) bool {
	return obj.GetAnnotations()[StrippedAnnotation] == "true"
}
