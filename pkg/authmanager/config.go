package authmanager

import (
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// Client rate limits of the manager. controller-runtime gives each resource type its own
// REST client, and client-go each client its own token bucket of these limits: they bind
// per resource type, not for the manager as a whole. One handshake asks at most 5 requests
// of one type of a provider (SubjectAccessReviews), so the limits admit
// TargetHandshakeRate handshakes a second. At 200 a second they admitted 40, fewer than 2
// cores serve: 1000 consumers took 28 s, waiting on the bucket with a fifth of the CPU
// idle, and take 19 s at these (docs/benchmarks.md, history). The API server's priority
// and fairness still shares it among its clients.
const (
	DefaultQPS   = 500
	DefaultBurst = 1000
)

// TargetHandshakeRate is how many handshakes a second into one provider the manager's
// client limits admit: about twice what a 2-core machine serves. The request budget
// (test/integration) holds every resource type's requests per handshake to
// DefaultQPS / TargetHandshakeRate.
const TargetHandshakeRate = 100

// ControllerConfig tunes the controllers: Workers each (the tenant controller sets its
// own, tenant.Workers), so that handshakes waiting on the API server do not hold the
// others, and no name validation across managers (several in-process runners may share a
// process).
func ControllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: 30 * time.Second, MaxConcurrentReconciles: Workers}
}

// Workers is how many objects each controller reconciles at once, unless it sets its own
// (the tenant controller: tenant.Workers). A reconcile spends nearly all its time waiting
// for API calls in sequence, so a provider's throughput with
// many consumers is about Workers divided by that latency until the API server's CPUs are
// the limit; Workers is chosen to reach that limit (measured in docs/benchmarks.md).
const Workers = 16
