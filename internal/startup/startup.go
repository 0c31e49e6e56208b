// Package startup pauses the garbage collector while a command's packages are
// initialized.
//
// A Kubernetes client links hundreds of packages whose init functions build
// long-lived data: the client-go and controller-runtime schemes alone register
// every built-in API group twice. Those few megabytes are all still reachable
// when main starts, so a collection during initialization frees nothing and
// costs a stop-the-world cycle, background mark workers and a sweep on every
// invocation, including `liqoctl version` and shell completion.
//
// Importing this package turns the collector off as soon as its own init runs,
// which the Go specification's initialization order (dependencies first, then
// the lexically smallest import path) places before the heavy Kubernetes
// packages; Done restores the setting in force before (GOGC, or the default),
// and must be the first statement of main. A memory limit set with GOMEMLIMIT
// keeps applying throughout.
package startup

import (
	"runtime/debug"
	"time"
)

// gcPercent is the collector setting found when the pause began. It is written
// once, during package initialization, and only read afterwards.
var gcPercent = debug.SetGCPercent(-1)

// began is when this package was initialized: before the heavy packages, a few
// milliseconds after the process was executed.
var began = time.Now()

// Began is when the process began initializing its packages: the origin of the
// times liqoctl -v prints, so that they include package initialization and
// client setup.
func Began() time.Time { return began }

// Done ends the pause started when this package was initialized and restores
// the garbage collector setting of the process (GOGC, or 100). Calling it
// again is harmless.
func Done() {
	debug.SetGCPercent(gcPercent)
}
