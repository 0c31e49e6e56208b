// Package integration holds tests that need real Kubernetes control planes (see
// internal/testenv). They build the control-plane binaries on first use.
//
// Each test starts its own control planes, so any two could run together; on the 2 cores
// CI has, two tests that compute only slow each other down. The tests that mostly wait (a
// peer-gone grace period, a renewal every few seconds, a manager or API server restart, a
// settle time an attack must outlast) call t.Parallel: Go runs them after the others, four
// at a time (make test-integration passes -parallel 4). Measured on 2 cores, the eleven of
// them take 5.7 minutes one after another, 3 minutes two at a time and 1.7 minutes four at
// a time, using about a quarter of the CPU: they wait, they do not compute. A test that
// calls t.Setenv, or counts requests (TestHandshakeRequestBudget), never runs in parallel.
package integration
