package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AuthzPolicy is the policy used by the provider to authorize or reject the tenant's
// ResourceSlices.
type AuthzPolicy string

const (
	// KeysExchange requires a completed key exchange before accepting ResourceSlices.
	KeysExchange AuthzPolicy = "KeysExchange"
	// TolerateNoHandshake accepts ResourceSlices without a key exchange.
	TolerateNoHandshake AuthzPolicy = "TolerateNoHandshake"
)

// TenantCondition is the administrative state of a tenant.
type TenantCondition string

const (
	// TenantConditionActive lets the tenant use and negotiate resources.
	TenantConditionActive TenantCondition = "Active"
	// TenantConditionCordoned keeps what the tenant has, but grants nothing new.
	TenantConditionCordoned TenantCondition = "Cordoned"
	// TenantConditionDrained removes the tenant's access.
	TenantConditionDrained TenantCondition = "Drained"
)

// strictness orders the administrative states: a stricter one grants less.
func (c TenantCondition) strictness() int {
	switch c {
	case TenantConditionCordoned:
		return 1
	case TenantConditionDrained:
		return 2
	}
	return 0
}

// Stricter returns the stricter of two administrative states ("" is Active). The state in
// force is the stricter of the provider administrator's decision, kept where no tenant can
// write, and spec.tenantCondition, which the tenant may write: a tenant may restrict
// itself, never undo what the administrator decided.
func Stricter(a, b TenantCondition) TenantCondition {
	if b.strictness() > a.strictness() {
		a = b
	}
	if a == "" {
		return TenantConditionActive
	}
	return a
}

// TenantSpec is the consumer's handshake request, as applied on the provider.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterID) || (has(self.clusterID) && self.clusterID == oldSelf.clusterID)",message="clusterID is immutable"
type TenantSpec struct {
	// ClusterID is the consumer cluster's ID; immutable.
	ClusterID ClusterID `json:"clusterID,omitempty"`
	// AuthzPolicy is the policy for the tenant's ResourceSlices.
	// +kubebuilder:validation:Enum=KeysExchange;TolerateNoHandshake
	// +kubebuilder:default=KeysExchange
	AuthzPolicy *AuthzPolicy `json:"authzPolicy,omitempty"`
	// PublicKey is the consumer's public key: PEM PKIX, or a legacy raw Ed25519 key.
	// +kubebuilder:validation:MaxLength=65536
	PublicKey []byte `json:"publicKey,omitempty"`
	// CSR is the consumer's PEM certificate signing request (CN=<clusterID>, O=liqo.io).
	// +kubebuilder:validation:MaxLength=65536
	CSR []byte `json:"csr,omitempty"`
	// Signature is the consumer's signature of the provider's nonce.
	// +kubebuilder:validation:MaxLength=65536
	Signature []byte `json:"signature,omitempty"`
	// ProxyURL is the optional proxy the consumer uses to reach the provider.
	// +kubebuilder:validation:MaxLength=2048
	ProxyURL *string `json:"proxyURL,omitempty"`
	// TenantCondition is the administrative state of the tenant.
	// +kubebuilder:validation:Enum=Active;Cordoned;Drained
	// +kubebuilder:default=Active
	TenantCondition TenantCondition `json:"tenantCondition,omitempty"`
}

// TenantStatus is what the provider observed and issued.
type TenantStatus struct {
	// TenantNamespace is the provider namespace dedicated to this consumer.
	TenantNamespace string `json:"tenantNamespace,omitempty"`
	// AuthParams are the parameters the consumer copies into its Identity.
	AuthParams *AuthParams `json:"authParams,omitempty"`
	// TenantCondition is the administrative state in force: the stricter of
	// spec.tenantCondition and the provider administrator's decision (liqoctl cordon,
	// uncordon, drain), which the provider keeps where the tenant cannot write.
	TenantCondition TenantCondition `json:"tenantCondition,omitempty"`
	// AcceptedKeyFingerprint records the consumer key the handshake accepted
	// ("sha256:<hex>"). A Tenant whose key or CSR changes needs a new handshake.
	AcceptedKeyFingerprint string `json:"acceptedKeyFingerprint,omitempty"`
	// AcceptedCSRDigest is the SHA-256 of the accepted CSR.
	AcceptedCSRDigest string `json:"acceptedCSRDigest,omitempty"`
	// AcceptedAt is when the handshake was accepted.
	AcceptedAt *metav1.Time `json:"acceptedAt,omitempty"`
	// AcceptanceSeal is the provider's signature, with its cluster key, of the acceptance
	// (Tenant UID, cluster ID, key fingerprint, CSR digest). The provider submits a CSR
	// only when the seal verifies against the spec: writing status is not enough to have a
	// certificate issued.
	// +kubebuilder:validation:MaxLength=1024
	AcceptanceSeal []byte `json:"acceptanceSeal,omitempty"`
	// Certificate describes the certificate currently published in AuthParams.
	Certificate *CertificateInfo `json:"certificate,omitempty"`
	// LastRenewal is when the provider last published a certificate that replaced
	// another (not the first one).
	LastRenewal *metav1.Time `json:"lastRenewal,omitempty"`
	// LastRefusal is the last refusal of this tenant's handshake or certificate.
	LastRefusal *Refusal `json:"lastRefusal,omitempty"`
	// ObservedGeneration is the generation the status reflects.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions say whether the handshake is accepted, refused or pending, and why.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=liqo,shortName=tn
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Condition",type=string,JSONPath=`.status.tenantCondition`
// +kubebuilder:printcolumn:name="Approval",type=string,JSONPath=`.status.conditions[?(@.type=="Approved")].reason`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.certificate.notAfter`
// +kubebuilder:printcolumn:name="Renewed",type=date,JSONPath=`.status.lastRenewal`
// +kubebuilder:printcolumn:name="Refused",type=string,JSONPath=`.status.lastRefusal.reason`
// +kubebuilder:printcolumn:name="Serial",type=string,JSONPath=`.status.certificate.serialNumber`,priority=1
// +kubebuilder:printcolumn:name="Fingerprint",type=string,JSONPath=`.status.acceptedKeyFingerprint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Tenant represents a consumer cluster on the provider.
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TenantSpec   `json:"spec,omitempty"`
	Status TenantStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TenantList is a list of Tenants.
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}
