package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSliceClass is the class of a ResourceSlice, like an ingress class.
type ResourceSliceClass string

// ResourceSliceSpec is a consumer's request for resources on a provider, and for a
// narrower identity to use them with (the one a virtual kubelet runs as).
// +kubebuilder:validation:XValidation:rule="has(self.class) == has(oldSelf.class) && (!has(self.class) || self.class == oldSelf.class)",message="class is immutable"
type ResourceSliceSpec struct {
	// ConsumerClusterID is the consumer cluster's ID.
	ConsumerClusterID *ClusterID `json:"consumerClusterID,omitempty"`
	// ProviderClusterID is the provider cluster's ID.
	ProviderClusterID *ClusterID `json:"providerClusterID,omitempty"`
	// Resources are the requested resources: at most 16, none negative (a negative one
	// would make room under the tenant's limits for the others).
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="resources may not be negative"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="resource names are qualified names (no control or bidirectional characters)"
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Class of the slice; immutable.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Class ResourceSliceClass `json:"class,omitempty"`
	// CSR is the consumer's certificate signing request for this slice (a provider refuses
	// one over 8 KiB).
	// +kubebuilder:validation:MaxLength=16384
	CSR []byte `json:"csr,omitempty"`
}

// ResourceSliceCondition reports the state of one aspect of a slice.
type ResourceSliceCondition struct {
	// Type of the condition.
	// +kubebuilder:validation:Enum=Authentication;Resources
	Type string `json:"type"`
	// Status of the condition.
	// +kubebuilder:validation:Enum=Accepted;Denied
	Status string `json:"status"`
	// LastTransitionTime is when the status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a machine-readable cause.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$`
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation.
	// +kubebuilder:validation:MaxLength=8192
	// +kubebuilder:validation:Pattern=`^[^\x00-\x08\x0b-\x1f\x7f-\x9f\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}\x{fffd}]*$`
	Message string `json:"message,omitempty"`
}

// ResourceSliceStatus is the provider's answer to a slice request.
type ResourceSliceStatus struct {
	// Conditions of the slice.
	// +kubebuilder:validation:MaxItems=8
	Conditions []ResourceSliceCondition `json:"conditions,omitempty"`
	// Class resolved by the provider.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Class ResourceSliceClass `json:"class,omitempty"`
	// Resources granted.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="resource names are qualified names (no control or bidirectional characters)"
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// AuthParams of the identity for this slice.
	AuthParams *AuthParams `json:"authParams,omitempty"`
	// NodeLabels of the provider.
	// +kubebuilder:validation:MaxProperties=64
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// NodeSelector applied to offloaded pods.
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// StorageClasses offered by the provider (as Liqo's providers fill it).
	// +kubebuilder:validation:MaxItems=64
	StorageClasses []StorageType `json:"storageClasses,omitempty"`
	// IngressClasses offered by the provider.
	// +kubebuilder:validation:MaxItems=64
	IngressClasses []IngressType `json:"ingressClasses,omitempty"`
	// LoadBalancerClasses offered by the provider.
	// +kubebuilder:validation:MaxItems=64
	LoadBalancerClasses []LoadBalancerType `json:"loadBalancerClasses,omitempty"`
	// Certificate describes the certificate in AuthParams (this project's; Liqo does not
	// write it).
	Certificate *CertificateInfo `json:"certificate,omitempty"`
	// ObservedGeneration is the generation the provider last decided on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Condition types and statuses of a ResourceSlice.
const (
	ResourceSliceConditionAuthentication = "Authentication"
	ResourceSliceConditionResources      = "Resources"
	ResourceSliceAccepted                = "Accepted"
	ResourceSliceDenied                  = "Denied"
)

// Reasons of the ResourceSlice conditions (Liqo's).
const (
	ReasonSliceAuthenticationAccepted = "ResourceSliceAuthenticationAccepted"
	ReasonSliceAuthenticationDenied   = "ResourceSliceAuthenticationDenied"
	ReasonSliceResourcesAccepted      = "ResourceSliceResourcesAccepted"
	ReasonSliceResourcesDenied        = "ResourceSliceResourcesDenied"
	ReasonDefaultSliceClassDisabled   = "DefaultResourceSliceClassDisabled"
)

// SliceCondition returns the condition of type typ, nil when there is none.
func SliceCondition(conds []ResourceSliceCondition, typ string) *ResourceSliceCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// SliceVerdict reads the provider's decision on a slice: accepted when both its
// Authentication and Resources conditions are Accepted; denied is the first Denied one;
// neither while the provider has not decided both.
func SliceVerdict(conds []ResourceSliceCondition) (accepted bool, denied *ResourceSliceCondition) {
	accepted = true
	for _, typ := range []string{ResourceSliceConditionAuthentication, ResourceSliceConditionResources} {
		c := SliceCondition(conds, typ)
		switch {
		case c != nil && c.Status == ResourceSliceDenied:
			return false, c
		case c == nil || c.Status != ResourceSliceAccepted:
			accepted = false
		}
	}
	return accepted, nil
}

// SetSliceCondition sets the condition of type typ and reports whether it changed.
func SetSliceCondition(conds *[]ResourceSliceCondition, typ, status, reason, msg string, now metav1.Time) bool {
	if c := SliceCondition(*conds, typ); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return true
	}
	*conds = append(*conds, ResourceSliceCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
	return true
}

// StorageType is a storage class a provider offers.
type StorageType struct {
	// StorageClassName is the name of the storage class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	StorageClassName string `json:"storageClassName"`
	// Default says it is the default storage class for offloaded workloads.
	Default bool `json:"default,omitempty"`
}

// IngressType is an ingress class a provider offers.
type IngressType struct {
	// IngressClassName is the name of the ingress class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	IngressClassName string `json:"ingressClassName"`
	// Default says it is the default ingress class for offloaded workloads.
	Default bool `json:"default,omitempty"`
}

// LoadBalancerType is a load balancer class a provider offers.
type LoadBalancerType struct {
	// LoadBalancerClassName is the name of the load balancer class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	LoadBalancerClassName string `json:"loadBalancerClassName"`
	// Default says it is the default load balancer class for offloaded workloads.
	Default bool `json:"default,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=liqo,shortName=rslice
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Authentication",type=string,JSONPath=`.status.conditions[?(@.type=="Authentication")].status`
// +kubebuilder:printcolumn:name="Resources",type=string,JSONPath=`.status.conditions[?(@.type=="Resources")].status`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.certificate.notAfter`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ResourceSlice is a slice of resources a provider gives to a consumer. Its name is a
// label value on what it causes, and part of its identity's user name: at most 50
// characters.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 50",message="a ResourceSlice name is at most 50 characters"
type ResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceSliceSpec   `json:"spec,omitempty"`
	Status ResourceSliceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ResourceSliceList is a list of ResourceSlices.
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceSlice `json:"items"`
}
