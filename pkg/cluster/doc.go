// Package cluster reads and ensures what a cluster holds about itself and its peers: its
// cluster ID and configuration, its key pair, its tenant namespaces (including Liqo's
// naming and designation by the recorded creator) and the tenant records that name them
// and keep the administrator's decisions. Every Ensure function is idempotent and never
// overwrites what exists. Names and labels live in package wire, access rules in access,
// installation in installer, revocation proofs in revocation.
package cluster
