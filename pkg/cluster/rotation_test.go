package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNextRotationKeepsEveryKeyRotatedAwayFrom: after A->B then B->C, neither A nor B is
// ever accepted again (a seal kept from before either rotation must not bring it back).
func TestNextRotationKeepsEveryKeyRotatedAwayFrom(t *testing.T) {
	first := NextRotation(nil, KeyRotation{TenantUID: "u", From: "A", To: "B"})
	rec := &TenantRecord{KeyRotation: first}
	assert.True(t, rec.RotatedAwayFrom("A"))
	assert.False(t, rec.RotatedAwayFrom("B"))
	rec.KeyRotation = NextRotation(rec.KeyRotation, KeyRotation{TenantUID: "u", From: "B", To: "C"})
	for _, fp := range []string{"A", "B"} {
		assert.True(t, rec.RotatedAwayFrom(fp), fp)
	}
	assert.False(t, rec.RotatedAwayFrom("C"))
	assert.False(t, rec.RotatedAwayFrom(""))
	assert.False(t, (*TenantRecord)(nil).RotatedAwayFrom("A"))
}
