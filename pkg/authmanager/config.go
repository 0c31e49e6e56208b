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

// ControllerConfig tunes the controllers: several workers, so that one handshake waiting
// on the API server does not hold the others, and no name validation across managers
// (several in-process runners may share a process).
func ControllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: 30 * time.Second, MaxConcurrentReconciles: 4}
}
