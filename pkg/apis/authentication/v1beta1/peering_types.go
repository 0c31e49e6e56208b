package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeeringSpec is a consumer's declaration: peer with the provider its bootstrap credential
// reaches, and ask it for these slices. Only Peerings in the Liqo namespace are carried out.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerClusterID) || (has(self.providerClusterID) && self.providerClusterID == oldSelf.providerClusterID)",message="providerClusterID is immutable once set"
type PeeringSpec struct {
	// BootstrapSecretRef names the Secret, in the Peering's namespace, whose data key
	// "kubeconfig" holds the peering user the provider's administrator generated
	// (liqoctl generate peering-user). It is used once: when the Identity is ready, the
	// peering user retires itself on the provider, and the Secret may be deleted.
	BootstrapSecretRef corev1.LocalObjectReference `json:"bootstrapSecretRef"`
	// ProviderClusterID, when set, is the only provider this Peering may reach: a bootstrap
	// credential for another cluster is refused before anything is sent to it.
	// +optional
	ProviderClusterID ClusterID `json:"providerClusterID,omitempty"`
	// ProviderCAFingerprint, when set, is the SHA-256 fingerprint (sha256:<64 hex>) of the
	// CA the provider's API server presents and signs the consumer's certificate with: the
	// bootstrap kubeconfig and the provider's answer must both carry that CA.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ProviderCAFingerprint string `json:"providerCAFingerprint,omitempty"`
	// ProviderNamespace is the Liqo namespace of the provider (liqo when empty).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ProviderNamespace string `json:"providerNamespace,omitempty"`
	// ResourceSlices are the slices to ask the provider for once peered, each with its own
	// narrower identity.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	ResourceSlices []PeeringSlice `json:"resourceSlices,omitempty"`
}

// PeeringSlice is one ResourceSlice a Peering asks for.
type PeeringSlice struct {
	// Name of the ResourceSlice, in the consumer's tenant namespace of the provider.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Class of the slice (the provider's default when empty).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Class ResourceSliceClass `json:"class,omitempty"`
	// Resources requested (the ResourceSlice made from it refuses negative ones).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// PeeringState is where a Peering stands, in one word.
// +kubebuilder:validation:Enum=Pending;Authenticating;WaitingForApproval;Peered;Failed;Leaving
type PeeringState string

// The states of a Peering.
const (
	// PeeringPending: waiting for something the consumer's administrator provides (the
	// bootstrap Secret).
	PeeringPending PeeringState = "Pending"
	// PeeringAuthenticating: the handshake runs.
	PeeringAuthenticating PeeringState = "Authenticating"
	// PeeringWaitingForApproval: the provider accepted the handshake and waits for its
	// administrator's approval.
	PeeringWaitingForApproval PeeringState = "WaitingForApproval"
	// PeeringPeered: the consumer's Identity of the provider is ready.
	PeeringPeered PeeringState = "Peered"
	// PeeringFailed: stuck on something only a person can fix; the Ready condition says
	// what.
	PeeringFailed PeeringState = "Failed"
	// PeeringLeaving: the Peering is deleted and the consumer leaves the provider.
	PeeringLeaving PeeringState = "Leaving"
)

// PeeringBootstrap describes the bootstrap credential a Peering used (never the credential).
type PeeringBootstrap struct {
	// User is the peering user's name on the provider.
	// +kubebuilder:validation:MaxLength=253
	User string `json:"user,omitempty"`
	// Serial of its certificate, in hex.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]*$`
	Serial string `json:"serial,omitempty"`
	// NotAfter is when its certificate expires.
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// Retired is when the peering user retired itself on the provider, proven.
	Retired *metav1.Time `json:"retired,omitempty"`
}

// PeeringStatus is what the consumer's manager made of the Peering.
type PeeringStatus struct {
	// State in one word; the Ready condition says why.
	State PeeringState `json:"state,omitempty"`
	// ProviderClusterID is the provider the bootstrap credential reached.
	ProviderClusterID ClusterID `json:"providerClusterID,omitempty"`
	// TenantNamespace is the consumer's tenant namespace of the provider.
	// +kubebuilder:validation:MaxLength=63
	TenantNamespace string `json:"tenantNamespace,omitempty"`
	// Identity is the name of the consumer's Identity of the provider, in TenantNamespace.
	// +kubebuilder:validation:MaxLength=253
	Identity string `json:"identity,omitempty"`
	// Certificate describes the Identity's certificate (its expiry).
	Certificate *CertificateInfo `json:"certificate,omitempty"`
	// Bootstrap describes the bootstrap credential used.
	Bootstrap *PeeringBootstrap `json:"bootstrap,omitempty"`
	// ObservedGeneration is the generation the status reflects.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (peered, or why not), BootstrapRetired, SlicesReady.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=liqo
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.status.providerClusterID`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.certificate.notAfter`
// +kubebuilder:printcolumn:name="Bootstrap",type=string,JSONPath=`.status.conditions[?(@.type=="BootstrapRetired")].reason`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Peering declares that this cluster (the consumer) peers with a provider, reached with a
// single-use bootstrap credential; liqo-auth-manager carries it out with the handshake.
type Peering struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PeeringSpec   `json:"spec,omitempty"`
	Status PeeringStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PeeringList is a list of Peerings.
type PeeringList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Peering `json:"items"`
}

// Condition types of a Peering besides Ready.
const (
	// ConditionBootstrapRetired: the bootstrap peering user retired itself on the
	// provider, proven with its own access reviews.
	ConditionBootstrapRetired = "BootstrapRetired"
	// ConditionSlicesReady: every slice the Peering asks for is accepted, with its Identity.
	ConditionSlicesReady = "SlicesReady"
)
