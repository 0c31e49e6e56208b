package keyrotation

import (
	"context"
	"testing"

	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack36bRotationOfADeletedTenantBlocksEveryLaterOne acts as whoever may delete
// the consumer's Tenant on the provider (the tenant itself, leaving: handshake.Leave; a
// Tenant deleter of the tenant namespace; peergc once its presence Lease lapsed) while a
// rotation is recorded but not done. The record keeps keyRotation of the deleted Tenant's
// UID, not done, forever (nothing clears it); the consumer's next handshake makes a
// Tenant of another UID, and every rotation of that Tenant is refused as
// KeyRotationConflict ("another rotation ... not done yet"): the consumer can never move
// its key at this provider again without the administrator editing the record.
// docs/protocol.md says the check is "no other rotation of C under way": a rotation of a
// Tenant that no longer exists is not under way.
func TestAttack36bRotationOfADeletedTenantBlocksEveryLaterOne(t *testing.T) {
	k := newKeys()
	e := setup(t, k, tenant(k), rotationRenew(k, forge{}))
	// The rotation of the Tenant deleted mid-way (another UID), recorded, never done.
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, testID, false, func(rec *cluster.TenantRecord) error {
		rec.KeyRotation = cluster.NextRotation(nil, cluster.KeyRotation{TenantUID: "deleted-tenant-uid",
			From: must(authn.Fingerprint(k.other.Public())), To: must(authn.Fingerprint(k.old.Public())), CSRDigest: "sha256:deadbeef"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.writes.Take()
	_, evs := e.reconcile(t)
	if rot := e.record(t).KeyRotation; rot == nil || rot.TenantUID != testUID {
		t.Errorf("the honest rotation of the live Tenant %s was not recorded (events %v): a rotation of a deleted Tenant, not done, blocks it", testUID, evs)
	}
}
