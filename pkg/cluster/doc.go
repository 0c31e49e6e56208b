// Package cluster reads and ensures what a cluster holds about itself and its peers: its
// cluster ID, its key pair, and tenant namespaces. It also names every object of the
// protocol. Every Ensure function is idempotent and never overwrites what exists.
package cluster
