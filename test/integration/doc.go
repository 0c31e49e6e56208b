// Package integration holds tests that need real Kubernetes control planes (see
// internal/testenv). They build the control-plane binaries on first use.
//
// Each test starts its own control planes, so any two could run together; on the 2 cores
// CI has, two tests that compute only slow each other down. The tests that mostly wait (a
// peer-gone grace period, a renewal every few seconds, a manager or API server restart, a
// settle time an attack must outlast) call t.Parallel: Go runs them after the others, two
// at a time (-parallel defaults to GOMAXPROCS), so that one waits while the other works.
// A test that calls t.Setenv, or counts requests (TestHandshakeRequestBudget), never does.
package integration
