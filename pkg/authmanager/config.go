package authmanager

import (
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// Client rate limits of the manager: a provider serving hundreds of consumers makes a
// dozen API calls per handshake, far above client-go's default of 20 per second.
const (
	DefaultQPS   = 200
	DefaultBurst = 400
)

// ControllerConfig tunes the controllers: Workers each, so that handshakes waiting on the
// API server do not hold the others, and no name validation across managers (several
// in-process runners may share a process).
func ControllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: 30 * time.Second, MaxConcurrentReconciles: Workers}
}

// Workers is how many objects each controller reconciles at once. A reconcile spends
// nearly all its time waiting for API calls in sequence, so a provider's throughput with
// many consumers is about Workers divided by that latency until the API server's CPUs are
// the limit; Workers is chosen to reach that limit (measured in docs/benchmarks.md).
const Workers = 16
