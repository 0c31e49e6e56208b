// Package issuing holds the options a provider issues certificates with, shared by the
// controllers that issue them (tenant and providerslice).
package issuing

import "time"

// Options configure how a provider issues: what it hands to consumers (its API server URL
// and CA), how long a nonce lives, the lifetime and renewal of certificates and how long
// a CSR may wait for its signer. The tenant controller and the slice controller share them.
type Options struct {
	// APIServer is the provider API server URL handed to consumers.
	APIServer string
	// CA is the PEM CA bundle for APIServer.
	CA []byte
	// NonceTTL is how long a nonce may be used after it was issued.
	NonceTTL time.Duration
	// CertificateLifetime is the expirationSeconds asked for each certificate.
	CertificateLifetime time.Duration
	// CSRTimeout is how long an approved CSR may wait for its certificate before the
	// Tenant reports "approved but not issued".
	CSRTimeout time.Duration
	// RenewBefore, when set, renews a certificate when less than this remains; otherwise
	// a certificate is renewed after two thirds of its lifetime.
	RenewBefore time.Duration
}
