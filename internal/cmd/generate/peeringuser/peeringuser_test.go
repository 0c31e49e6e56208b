package peeringuser

import (
	"testing"

	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestOutputFormats: -o takes yaml as kubectl users type it (the kubeconfig is YAML), as
// well as kubeconfig and json, and refuses the rest.
func TestOutputFormats(t *testing.T) {
	for format, ok := range map[string]bool{"kubeconfig": true, "yaml": true, "json": true, "name": false, "xml": false} {
		o := &Options{ConsumerClusterID: "cl-consumer", TTL: handshake.DefaultPeeringUserTTL, Output: format}
		if err := o.Validate(); ok != (err == nil) {
			t.Errorf("-o %s: %v", format, err)
		}
	}
}
