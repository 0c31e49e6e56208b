package wire

import "testing"

// TestPeeringUserConsumer: the consumer a peering user names, whose own ID may hold dashes,
// is what PeeringUserName was given.
func TestPeeringUserConsumer(t *testing.T) {
	for user, want := range map[string]string{
		PeeringUserName("cl-consumer", "0a1b2c3d"): "cl-consumer",
		PeeringUserName("a", "b"):                  "a",
		"liqo-peer-user-cl-consumer-x7k2q":         "cl-consumer",
		"liqo-peer-user-a-b-c-d":                   "a-b-c",
		"liqo-peer-user-nodash":                    "nodash",
		"liqo-peer-user-x":                         "x",
		"kubernetes-admin":                         "kubernetes",
	} {
		if got := PeeringUserConsumer(user); got != want {
			t.Errorf("PeeringUserConsumer(%q) = %q, want %q", user, got, want)
		}
	}
}
