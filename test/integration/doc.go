// Package integration holds tests that need real Kubernetes control planes (see
// internal/testenv). They build the control-plane binaries on first use.
//
// Each test starts its own control planes, so any two can run together, and most of a
// test's time is waiting: for a control plane to start, a controller to answer, a grace
// period, a renewal or a settle time an attack must outlast. Measured on CI's 2 cores, the
// tests run one after another left the CPUs three quarters idle. So every test calls
// t.Parallel first, and make test-integration runs TEST_PARALLEL of them at a time (3).
//
// A test that must run alone says why in a comment "// Serial: <why>" before its first
// statement, instead of t.Parallel: one that calls t.Setenv (the environment is the
// process's); one that counts requests (TestHandshakeRequestBudget); one that floods its
// API server, or measures a deadline during a flood; one whose attack settles for a fixed
// second or few before it counts what was left (a manager slowed by other tests would look
// like a leak); one that computes (a flood of handshakes, an image build, a real node).
// Go runs those first, one by one, and the others after them. TestEveryTestSaysHowItRuns
// fails for a test that says neither.
package integration
