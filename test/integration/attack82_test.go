package integration

// Attack 82 (helper-48 on ba3533a, with 3f9c7b7 for context). The consumer's manager pins,
// once (pinnedOnce), liqo-tenant-<consumer> and no proxy in the record of a peering a
// Peering made before the pins (pinLegacy), whenever the record lists a bootstrap
// credential that Peering used and an Identity of the provider is there. Neither says
// which handshake made the Identity that is there now.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack82LegacyPinTakesAHandMadePeeringForThePeerings. The consumer peered through a
// Peering (liqo-tenant-<consumer> on the provider), its administrator ran liqoctl
// unauthenticate (the Peering stays, its record still names it), the provider's
// administrator moved the consumer's tenant namespace to N (adopted), and the consumer's
// administrator peered again by hand, liqoctl authenticate with both kubeconfigs, and asked
// a slice, whose copy is in N. The record is as a release before the pins wrote it (no
// pins, no pinnedOnce). The consumer's manager takes the hand-made Identity for the
// Peering's and pins liqo-tenant-<consumer>, where this peering is not. An Identity writer
// of the consumer's tenant namespace (identities get, list, update; nothing else) then
// moves every Identity of the provider there, which the pin accepts. What must hold:
// liqoctl delete resourceslice never says "verified" while the slice identity still reads
// its copy in N.
func TestAttack82LegacyPinTakesAHandMadePeeringForThePeerings(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const n, name = "a82-consumer-space", "slice-a82"

	pe, kc := pinHandMadeAfterAPeering(t, c, p, "a82", n, name)
	def := wire.TenantNamespaceName(c.id)

	// The Identity writer: every Identity of the provider now names the default.
	moveAll := pinMoveAllIdentities(t, c, p, "identity-writer-a82", def)
	moveAll()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && a77Pin(t, c, p) == "" {
		time.Sleep(200 * time.Millisecond)
	}
	pinned := a77Pin(t, c, p)
	t.Logf("pin after the old record met the Peering: %q (the provider keeps this cluster in %q); Peering events: %v", pinned, n, peeringEvents(t, c.client, pe.Name))
	// Since 6b785a9 the manager's pin is its guess, and marked so: never taken as where
	// the copy is.
	assert.False(t, pinned == def && a81Record(t, c, p)["pinnedByManager"] != "true",
		"the manager pinned %s, the Peering's namespace, for a peering liqoctl authenticate made in %s, as if a handshake had", def, n)
	moveAll()
	time.Sleep(3 * time.Second) // the identity controller decides the moved Identities

	pinDeleteSliceNeverFalselyVerified(t, c, p, n, name, kc)
}
