// Package authn is the pure cryptography of the Liqo authentication handshake: cluster
// key pairs and their fingerprints, the nonce challenge and its signature, the
// control-plane CSR and the provider's checks of it, and the consumer's checks of the
// certificate it gets back before it forges a kubeconfig.
//
// It never talks to a Kubernetes API server. Every check of untrusted input fails with an
// *Error carrying a stable Reason, used verbatim in Events and status conditions.
package authn
