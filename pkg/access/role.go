package access

import "strings"

// Role is the side of the handshake a cluster's controllers play: a provider signs its
// consumers' certificates, a consumer signs nonces and writes kubeconfigs. A cluster is
// often both.
type Role uint8

// The roles.
const (
	Provider Role = 1 << iota
	Consumer
	// Both is a provider and a consumer.
	Both = Provider | Consumer
)

// Has reports whether r includes every role of x.
func (r Role) Has(x Role) bool { return x != 0 && r&x == x }

// String names the role: "provider", "consumer", "provider and consumer" or "none".
func (r Role) String() string {
	var parts []string
	if r.Has(Provider) {
		parts = append(parts, "provider")
	}
	if r.Has(Consumer) {
		parts = append(parts, "consumer")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " and ")
}
