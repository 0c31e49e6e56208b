package manager

import (
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// ctrlConfig tunes the controllers for a handshake that should take milliseconds: no
// name validation across managers (several in-process runners may share a process in
// tests) and a short first retry.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), CacheSyncTimeout: 30 * time.Second}
}
