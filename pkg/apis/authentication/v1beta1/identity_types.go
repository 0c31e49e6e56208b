package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IdentityType is what an Identity is for.
type IdentityType string

const (
	// ControlPlaneIdentityType is the identity of the consumer's control plane.
	ControlPlaneIdentityType IdentityType = "ControlPlane"
	// ResourceSliceIdentityType is the identity bound to a ResourceSlice.
	ResourceSliceIdentityType IdentityType = "ResourceSlice"
)

// IdentitySpec is the credential a provider handed to the consumer.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterID) || (has(self.clusterID) && self.clusterID == oldSelf.clusterID)",message="clusterID is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.type) || (has(self.type) && self.type == oldSelf.type)",message="type is immutable"
type IdentitySpec struct {
	// ClusterID is the provider cluster's ID; immutable.
	ClusterID ClusterID `json:"clusterID,omitempty"`
	// Type is the type of the identity; immutable.
	// +kubebuilder:validation:Enum=ControlPlane;ResourceSlice
	Type IdentityType `json:"type,omitempty"`
	// AuthParams are the provider's Tenant status authParams.
	AuthParams AuthParams `json:"authParams,omitempty"`
	// Namespace is the provider namespace where the identity operates.
	// +kubebuilder:validation:Optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace *string `json:"namespace,omitempty"`
}

// IdentityStatus is what the consumer made of the Identity.
type IdentityStatus struct {
	// KubeconfigSecretRef names the Secret holding the kubeconfig of this identity.
	KubeconfigSecretRef *corev1.LocalObjectReference `json:"kubeconfigSecretRef,omitempty"`
	// Certificate describes the certificate in the kubeconfig.
	Certificate *CertificateInfo `json:"certificate,omitempty"`
	// CAFingerprint is the fingerprint of the provider CA the kubeconfig trusts.
	CAFingerprint string `json:"caFingerprint,omitempty"`
	// LastRenewal is when the kubeconfig last took a certificate that replaced another.
	LastRenewal *metav1.Time `json:"lastRenewal,omitempty"`
	// LastRefusal is the last refusal of this Identity (its Ready condition), and why.
	LastRefusal *Refusal `json:"lastRefusal,omitempty"`
	// ObservedGeneration is the generation the status reflects.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions say whether the identity is usable, and why not.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=liqo,shortName=id
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="KubeconfigSecret",type=string,JSONPath=`.status.kubeconfigSecretRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.certificate.notAfter`
// +kubebuilder:printcolumn:name="Renewed",type=date,JSONPath=`.status.lastRenewal`
// +kubebuilder:printcolumn:name="Refused",type=string,JSONPath=`.status.lastRefusal.reason`
// +kubebuilder:printcolumn:name="Serial",type=string,JSONPath=`.status.certificate.serialNumber`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Identity holds a credential to operate on a provider cluster.
type Identity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IdentitySpec   `json:"spec,omitempty"`
	Status IdentityStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// IdentityList is a list of Identities.
type IdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Identity `json:"items"`
}
