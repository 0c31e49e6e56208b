// Package rotation drives a cluster's key rotation (protocol.md, "11. Key rotation"): it
// stages the next key, moves this cluster's identity with every liqo-auth provider to it
// (the consumer's steps 1, 5 and 7 of the protocol, over the provider's Renew
// liqo-auth-key-rotation), switches to it once every provider moved or was named as
// unable to, and retires the previous key once no Identity holds a certificate for it, each
// old certificate was proven to authorize nothing, and no Tenant this cluster accepted is
// sealed by it.
//
// Every step is idempotent and decided from persisted state only: the authentication-keys
// Secret, the Identities, this cluster's tenant records (KeyMove) and the Renew on each
// provider. An interrupted rotation (a restart, a provider unreachable, Ctrl-C) resumes
// where it stopped.
//
// Who may write what it reads: the keys Secret and the tenant records, this cluster's
// administrator and its manager; Identities, Identity writers of the tenant namespace (a
// certificate is taken only after authn.VerifyCertificate for one of this cluster's keys,
// its user and the pinned CA, and an old certificate is proven with the old key itself);
// the Renew on the provider, the provider and this cluster's identity there (its answer is
// checked like any certificate the provider publishes).
package rotation

import (
	"fmt"
	"strings"
)

// State is how far one peer is in the rotation.
type State string

// The states of a peer, in order; CannotMove is a peer that blocks the retirement.
const (
	// Pending: nothing was asked of the provider yet.
	Pending State = "Pending"
	// Requested: the rotation Renew is on the provider, signed by both keys.
	Requested State = "Requested"
	// Issued: the provider issued a certificate for the new key.
	Issued State = "Issued"
	// Moved: the Identity holds the new certificate; the provider is told (done
	// signature) and the old certificate is not proven powerless yet.
	Moved State = "Moved"
	// Proven: the old certificate authorizes nothing on the provider (SelfSubjectAccess
	// Reviews made with it).
	Proven State = "Proven"
	// CannotMove: the peer cannot move (a Liqo provider, an unreachable one, ...).
	CannotMove State = "CannotMove"
)

// Progress is one peer's progress.
type Progress struct {
	// Peer is the provider's cluster ID; Kind says which identity ("control plane", or a
	// slice's name).
	Peer string `json:"peer"`
	// State is how far it is.
	State State `json:"state"`
	// Reason says why it cannot move (or what it waits for).
	Reason string `json:"reason,omitempty"`
	// Run is what its administrator (or this cluster's) runs to unblock it.
	Run string `json:"run,omitempty"`
}

// String is the progress line liqoctl prints.
func (p Progress) String() string {
	s := fmt.Sprintf("%s: %s", p.Peer, p.State)
	if p.Reason != "" {
		s += " (" + p.Reason + ")"
	}
	if p.Run != "" {
		s += "; run: " + p.Run
	}
	return s
}

// Phase is a cluster's step in the rotation.
type Phase string

// The phases of a rotation.
const (
	// Idle: no rotation under way.
	Idle Phase = "Idle"
	// Staged: the next key is staged; the identities with the providers move to it.
	Staged Phase = "Staged"
	// Switched: the next key is the current one; the previous one is kept until every
	// peer moved away from it.
	Switched Phase = "Switched"
	// Retired: the previous key is gone (the rotation ended).
	Retired Phase = "Retired"
)

// Status is a rotation's state: the phase, each provider's progress, and what else the
// retirement waits for.
type Status struct {
	Phase Phase      `json:"phase"`
	Peers []Progress `json:"peers,omitempty"`
	// SlicesOnPrevious are the slice Identities that still hold a certificate for a key
	// other than the current one (after the switch, the consumer slice controller moves
	// them).
	SlicesOnPrevious []string `json:"slicesOnPrevious,omitempty"`
	// TenantsOnPrevious are the Tenants this cluster accepted (as a provider) whose seal is
	// still by the previous key.
	TenantsOnPrevious []string `json:"tenantsOnPrevious,omitempty"`
}

// Blocked names the peers that cannot move, with what their administrators run.
func (s Status) Blocked() []Progress {
	var out []Progress
	for _, p := range s.Peers {
		if p.State == CannotMove {
			out = append(out, p)
		}
	}
	return out
}

// Waiting says in words what the rotation waits for ("" when nothing).
func (s Status) Waiting() string {
	var parts []string
	for _, p := range s.Peers {
		if p.State != Proven {
			parts = append(parts, p.Peer+" "+string(p.State))
		}
	}
	if n := len(s.SlicesOnPrevious); n > 0 {
		parts = append(parts, fmt.Sprintf("%d slice identities to move", n))
	}
	if n := len(s.TenantsOnPrevious); n > 0 {
		parts = append(parts, fmt.Sprintf("%d Tenants to re-seal", n))
	}
	return strings.Join(parts, ", ")
}

// Stuck says whether the rotation, switched, can go no further by itself for now: every
// provider that is not proven cannot move (the previous key stays until they do).
func (s Status) Stuck() bool {
	if s.Phase != Switched || len(s.Blocked()) == 0 {
		return false
	}
	for _, p := range s.Peers {
		if p.State != Proven && p.State != CannotMove {
			return false
		}
	}
	return true
}
