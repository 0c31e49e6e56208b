// Package integration holds tests that need real Kubernetes control planes (see
// internal/testenv). They build the control-plane binaries on first use.
package integration
