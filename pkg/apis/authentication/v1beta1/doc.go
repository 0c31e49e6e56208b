// Package v1beta1 holds the authentication.liqo.io/v1beta1 API: Tenant, Identity and
// ResourceSlice, wire-compatible with Liqo v1.x and extended with the status fields the
// stricter protocol of this project needs (conditions, accepted key fingerprint,
// certificate serial and validity).
//
// +kubebuilder:object:generate=true
// +groupName=authentication.liqo.io
package v1beta1
