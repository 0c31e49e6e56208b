package cluster

import (
	"slices"
	"time"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// recordRotationKey holds, on a provider, the rotation of the remote cluster's key.
const recordRotationKey = "keyRotation"

// KeyRotation is, on a provider, a consumer's proven move of its control-plane identity
// from one key to the next (docs/protocol.md, key rotation): written only by the manager
// (the keyrotation controller) once both signatures of the request verified. The tenant
// controller accepts the Tenant's new key only when this record names it.
type KeyRotation struct {
	// TenantUID is the UID of the Tenant that moves.
	TenantUID string `json:"tenantUID"`
	// From and To are the fingerprints of the old and the new key; CSRDigest the digest of
	// the new key's CSR.
	From      string `json:"from"`
	To        string `json:"to"`
	CSRDigest string `json:"csrDigest"`
	// FromSubjectKind and FromSubjectName are the subject (User or Group) the old identity
	// was bound as: bound beside the new key's group until Done, then proven to authorize
	// nothing.
	FromSubjectKind string `json:"fromSubjectKind"`
	FromSubjectName string `json:"fromSubjectName"`
	// At is when the rotation was recorded.
	At time.Time `json:"at"`
	// Done is set once the consumer signed, with the new key, that it holds the new
	// certificate: the old subject is no longer bound.
	Done bool `json:"done,omitempty"`
	// Revoked is when SubjectAccessReviews proved that the old subject may do none of the
	// tenant's rules (nil: not yet).
	Revoked *time.Time `json:"revoked,omitempty"`
	// RotatedAway are the fingerprints of every key this consumer rotated away from here,
	// this rotation's From included: none is ever accepted again, on any path (a Tenant
	// writer who kept an old spec and its seal cannot bring a replaced key back).
	RotatedAway []string `json:"rotatedAway,omitempty"`
}

// RotatedAwayFrom says whether the record names fp as a key its consumer rotated away
// from.
func (r *TenantRecord) RotatedAwayFrom(fp string) bool {
	if r == nil || r.KeyRotation == nil || fp == "" {
		return false
	}
	return r.KeyRotation.From == fp || slices.Contains(r.KeyRotation.RotatedAway, fp)
}

// NextRotation is the record of the proven rotation rot after cur (nil: none before): it
// keeps every key rotated away from.
func NextRotation(cur *KeyRotation, rot KeyRotation) *KeyRotation {
	var away []string
	if cur != nil {
		away = append(away, cur.RotatedAway...)
		away = append(away, cur.From)
	}
	away = append(away, rot.From)
	slices.Sort(away)
	rot.RotatedAway = slices.Compact(away)
	return &rot
}

// RotationTo is the rotation the record holds for Tenant tenantUID to the key with
// fingerprint to, nil when it holds none.
func (r *TenantRecord) RotationTo(tenantUID, to string) *KeyRotation {
	if r == nil || r.KeyRotation == nil || tenantUID == "" || to == "" {
		return nil
	}
	if rot := r.KeyRotation; rot.TenantUID == tenantUID && rot.To == to {
		return rot
	}
	return nil
}

// keyGroupOf is the key group of user for the key with fingerprint fp (authn.KeyGroup).
func keyGroupOf(user, fp string) string { return wire.KeyGroupPrefix + user + ":" + fp }

// ControlPlaneKeyGroups are every key group an identity of the remote cluster's control
// plane (user remoteID) may have been issued with by this provider: one per key of a
// control-plane certificate the record lists, and the two keys of its rotation. A
// revocation proof covers them all: a key-bound certificate authenticates with its key
// group, which Liqo's form (User <C>) does not name.
func (r *TenantRecord) ControlPlaneKeyGroups() []string {
	if r == nil {
		return nil
	}
	var out []string
	add := func(fp string) {
		if fp != "" && !slices.Contains(out, keyGroupOf(r.RemoteID, fp)) {
			out = append(out, keyGroupOf(r.RemoteID, fp))
		}
	}
	for _, c := range r.Certificates {
		if c.Slice == "" {
			add(c.KeyFingerprint)
		}
	}
	if r.KeyRotation != nil {
		add(r.KeyRotation.From)
		add(r.KeyRotation.To)
	}
	return out
}
