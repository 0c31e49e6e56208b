package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterID identifies a cluster: a DNS-1123 label of at most 51 characters, so that the
// tenant namespace name liqo-tenant-<id> fits in 63.
// +kubebuilder:validation:MaxLength=51
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type ClusterID string

// AuthParams are what a consumer needs to reach the provider API server as its tenant
// identity: the provider fills them in Tenant status, the consumer copies them into an
// Identity.
type AuthParams struct {
	// CA is the PEM CA bundle of the provider API server.
	// +kubebuilder:validation:MaxLength=131072
	CA []byte `json:"ca,omitempty"`
	// SignedCRT is the PEM client certificate issued to the consumer.
	// +kubebuilder:validation:MaxLength=131072
	SignedCRT []byte `json:"signedCRT,omitempty"`
	// APIServer is the URL of the provider API server.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[^\x00-\x08\x0b-\x1f\x7f-\x9f\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}\x{fffd}]*$`
	APIServer string `json:"apiServer,omitempty"`
	// ProxyURL is the optional proxy the consumer uses to reach the provider.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[^\x00-\x08\x0b-\x1f\x7f-\x9f\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}\x{fffd}]*$`
	ProxyURL *string `json:"proxyURL,omitempty"`
	// AwsConfig is what Liqo providers on EKS hand out instead of a certificate. This
	// project never fills it and refuses an Identity that carries it; the field is in the
	// schema so that a Liqo provider's objects survive this project's CRDs unchanged.
	AwsConfig *AwsConfig `json:"awsConfig,omitempty"`
}

// HasCertificate reports whether a (possibly absent) AuthParams carries a certificate.
func (a *AuthParams) HasCertificate() bool { return a != nil && len(a.SignedCRT) > 0 }

// AwsConfig is Liqo's AWS IAM credential for an EKS provider.
type AwsConfig struct {
	AwsUserArn         string `json:"awsUserArn"`
	AwsAccessKeyID     string `json:"awsAccessKeyID"`
	AwsSecretAccessKey string `json:"awsSecretAccessKey"`
	AwsRegion          string `json:"awsRegion"`
	AwsClusterName     string `json:"awsClusterName"`
}

// CertificateInfo describes an issued client certificate. It is never the certificate
// itself, so it can be shown by kubectl without leaking anything.
type CertificateInfo struct {
	// SerialNumber of the certificate, in hex.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]*$`
	SerialNumber string `json:"serialNumber,omitempty"`
	// NotBefore is when the certificate becomes valid.
	NotBefore *metav1.Time `json:"notBefore,omitempty"`
	// NotAfter is when the certificate expires.
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// RenewAfter is when the provider issues a new certificate.
	RenewAfter *metav1.Time `json:"renewAfter,omitempty"`
}

// Refusal is the last time a peer's credential was refused, and why.
type Refusal struct {
	// Reason is the machine-readable reason (that of the condition that refused it).
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$`
	Reason string `json:"reason"`
	// Time is when it was refused.
	Time metav1.Time `json:"time"`
}

// Condition types shared by Tenant and Identity.
const (
	// ConditionReady is True when the handshake is complete and the credential usable.
	ConditionReady = "Ready"
	// ConditionAuthenticated is True once the provider accepted the tenant's handshake.
	ConditionAuthenticated = "Authenticated"
	// ConditionCertificateIssued is True while a valid certificate is published.
	ConditionCertificateIssued = "CertificateIssued"
	// ConditionAccessGranted is True while the tenant's role binding exists.
	ConditionAccessGranted = "AccessGranted"
)
