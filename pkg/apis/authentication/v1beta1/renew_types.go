package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RenewSpec is what a consumer asks to have renewed: Liqo's channel for renewed
// certificates. A Renew named like the consumer's Identity (controlplane-<P>) lives in the
// consumer's tenant namespace and, copied by the consumer, in the provider's.
type RenewSpec struct {
	// ConsumerClusterID is the cluster ID of the consumer.
	ConsumerClusterID ClusterID `json:"consumerClusterID,omitempty"`
	// PublicKey of the consumer (PEM); older Liqo consumers send it with a CSR.
	// +kubebuilder:validation:MaxLength=8192
	PublicKey []byte `json:"publicKey,omitempty"`
	// CSR is the consumer's certificate signing request (PEM), when it sends one.
	// +kubebuilder:validation:MaxLength=16384
	CSR []byte `json:"csr,omitempty"`
	// IdentityType is the type of the identity to renew (ControlPlane or ResourceSlice).
	IdentityType IdentityType `json:"identityType,omitempty"`
	// ResourceSliceRef names the ResourceSlice of a ResourceSlice identity.
	ResourceSliceRef *corev1.LocalObjectReference `json:"resourceSliceRef,omitempty"`
}

// RenewStatus is the provider's answer: the current parameters of the identity.
type RenewStatus struct {
	// AuthParams are the renewed authentication parameters.
	AuthParams *AuthParams `json:"authParams,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=liqo
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Renew is Liqo's channel for renewed certificates between a consumer and a provider.
type Renew struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RenewSpec   `json:"spec,omitempty"`
	Status RenewStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RenewList is a list of Renews.
type RenewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Renew `json:"items"`
}
