package rotation

import (
	"fmt"
)

// held says which of the rotation's keys holds a certificate.
type held int

const (
	heldByNone held = iota // no key of the set (or no readable certificate)
	heldByOld              // a key of the set that is not the one moved to
	heldByNew              // the key moved to
)

// action is what the driver does for one peer after deciding.
type action int

const (
	doNothing     action = iota
	doRequest            // write (or replace) the rotation Renew, signed by both keys
	doTake               // record the move and put the new certificate in the Identity
	doSignDone           // set the done signature on the Renew
	doProve              // prove the old certificate authorizes nothing
	doDeleteRenew        // remove the rotation Renew: the peer moved
)

// peerFacts are what the decision about one provider reads, all persisted: the Identity's
// certificate, this cluster's record of the move, the provider (Liqo, reachable) and the
// rotation Renew there.
type peerFacts struct {
	peer string
	cert held
	// moveTo is the key the record's KeyMove moves to (""), proven whether it was proven.
	moveTo string
	proven bool
	// liqo: the provider lets this cluster's identity not read its own Tenant.
	liqo bool
	// unreachable is why the provider could not be asked ("" when it answered).
	unreachable string
	// renew says whether the rotation Renew is there, for these keys (from, to), answered
	// with a certificate for the new key, and with the done signature.
	renew, renewForThis, answered, doneSigned bool
	// kubeconfigMoved: the kubeconfig Secret holds the new certificate and works.
	kubeconfigMoved bool
	// newFP is the fingerprint of the key moved to; run names the commands of the peer's
	// administrator.
	newFP, server string
}

// decidePeer is the ordered rules of one provider's move: the first that applies wins.
func decidePeer(f peerFacts) (Progress, action) {
	p := Progress{Peer: f.peer}
	switch f.cert {
	case heldByNone:
		p.State, p.Reason = CannotMove, "its Identity holds no certificate for any key of this cluster"
		p.Run = fmt.Sprintf("liqoctl authenticate again with provider %s (a new handshake with the current key)", f.peer)
		return p, doNothing
	case heldByNew:
		return decideMoved(f, p)
	}
	switch {
	case f.liqo:
		p.State, p.Reason = CannotMove, "a Liqo provider knows no key rotation"
		p.Run = fmt.Sprintf("once this cluster switched keys, with the provider's kubeconfig: liqoctl unauthenticate --remote-kubeconfig <provider %s> && liqoctl authenticate --remote-kubeconfig <provider %s> (a new handshake under the new key)", f.peer, f.peer)
		return p, doNothing
	case f.unreachable != "":
		p.State, p.Reason = CannotMove, "unreachable: "+f.unreachable
		p.Run = fmt.Sprintf("make %s reachable from this cluster (the rotation resumes by itself)", f.server)
		return p, doNothing
	case !f.renew || !f.renewForThis:
		p.State = Pending
		return p, doRequest
	case f.answered:
		p.State = Issued
		return p, doTake
	default:
		p.State, p.Reason = Requested, "waiting for the provider's manager to re-seal the Tenant and issue the new certificate"
		p.Run = fmt.Sprintf("on provider %s: kubectl describe renew %s -n <tenant namespace of this cluster> (its Events say why it refuses); a provider without liqo-auth-manager cannot move", f.peer, "liqo-auth-key-rotation")
		return p, doNothing
	}
}

// decideMoved is decidePeer once the Identity holds a certificate for the new key.
func decideMoved(f peerFacts, p Progress) (Progress, action) {
	switch {
	case f.moveTo != f.newFP:
		// No record of a move to this key: the identity was made for it (a handshake
		// after the switch); there is no old certificate of this rotation to prove.
		p.State = Proven
		if f.renew {
			return p, doDeleteRenew
		}
		return p, doNothing
	case f.proven:
		p.State = Proven
		if f.renew {
			return p, doDeleteRenew
		}
		return p, doNothing
	case f.unreachable != "":
		p.State, p.Reason = Moved, "unreachable: "+f.unreachable
		p.Run = fmt.Sprintf("make %s reachable from this cluster (the rotation resumes by itself)", f.server)
		return p, doNothing
	case !f.kubeconfigMoved:
		p.State, p.Reason = Moved, "waiting for the kubeconfig of the new certificate"
		return p, doNothing
	case f.renew && !f.doneSigned:
		p.State = Moved
		return p, doSignDone
	default:
		p.State = Moved
		return p, doProve
	}
}

// clusterFacts are what the cluster's step reads: the keys, the providers' progress, and
// the slice Identities and Tenants still on the previous key.
type clusterFacts struct {
	next, previous        bool
	peers                 []Progress
	slicesOld, tenantsOld int
}

// clusterAction is the cluster's next step.
type clusterAction int

const (
	clusterWait clusterAction = iota
	clusterSwitch
	clusterRetire
)

// decideCluster: switch once every provider moved (or cannot), retire once every one is
// proven and nothing else holds the previous key.
func decideCluster(f clusterFacts) clusterAction {
	switch {
	case f.next:
		for _, p := range f.peers {
			if p.State != Proven && p.State != CannotMove {
				return clusterWait
			}
		}
		return clusterSwitch
	case f.previous:
		for _, p := range f.peers {
			if p.State != Proven {
				return clusterWait
			}
		}
		if f.slicesOld > 0 || f.tenantsOld > 0 {
			return clusterWait
		}
		return clusterRetire
	}
	return clusterWait
}
