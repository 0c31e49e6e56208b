package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack57CreateOnlyPrincipalClaimsTheFreedNonceSlot (review of 0c25d5c): under a full
// Secret quota, EnsureNonce now deletes a nonce it must replace (here: consumed, as the
// tenant record says) and then waits up to ~3 s for the quota's room to come back. The
// principal that filled the quota (create Secrets only, in the tenant namespace: no get,
// update, delete) polls a create of liqo-nonce itself, with a value of its choosing and the
// protocol's labels: when the resourcequota controller gives the deleted nonce's room back,
// its create takes it, the provider's replacement is refused (the quota is full again) and
// the next create nonce hands out the attacker's nonce (young, labelled, canonical, never
// consumed). Before 0c25d5c a full quota refused the create before anything was deleted:
// there was no freed slot to claim, and create nonce never handed out a planted value.
func TestAttack57CreateOnlyPrincipalClaimsTheFreedNonceSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	np := newQuotaProvider(t, "attack57-provider")
	p, tn, consumerID, createNonce, current := np.p, np.tn, np.consumerID, np.createNonce, np.nonce
	errOut, err := createNonce()
	require.NoError(t, err, "the first create nonce:\n%s", errOut)
	first, err := current()
	require.NoError(t, err)

	// Setup, as a handshake would leave it: the nonce is consumed (tenant record).
	require.NoError(t, cluster.UpdateTenantRecord(ctx, p.client, p.client, wire.DefaultLiqoNamespace, consumerID, false, func(rec *cluster.TenantRecord) error {
		rec.ConsumedNonce = &cluster.ConsumedNonce{Digest: cluster.NonceDigest(string(first.Data[wire.NonceField])), SecretUID: string(first.UID), At: time.Now()}
		return nil
	}))

	// Setup, as the administrator: a Secret quota with room for two more.
	sq := newSecretQuota(t, p, tn, 2)

	// The attack: a principal that may only create Secrets fills the quota...
	w := principal(t, p, "secret-creator", tn, rule("", "secrets", "create"))
	fillSecretQuota(t, w, tn)
	full := sq.used()

	// ...and polls a create of liqo-nonce with its own value.
	planted, err := authn.NewNonce()
	require.NoError(t, err)
	var claimed atomic.Bool
	stop := make(chan struct{}) // closed once the administrator's runs are over
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	attackerDone := make(chan struct{})
	go func() {
		defer close(attackerDone)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !stopped(); time.Sleep(2 * time.Millisecond) {
			s := secret(tn, wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: consumerID},
				map[string][]byte{wire.NonceField: []byte(planted)})
			if w.Create(ctx, s) == nil {
				claimed.Store(true)
				return
			}
		}
	}()
	// The resourcequota controller (none runs here) gives the room back on the deletion.
	replenished := make(chan struct{})
	go func() {
		defer close(replenished)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !stopped(); time.Sleep(20 * time.Millisecond) {
			s, getErr := current()
			if apierrors.IsNotFound(getErr) || (getErr == nil && s.UID != first.UID) {
				sq.setUsed(full - 1)
				return
			}
		}
	}()

	// The administrator replaces the consumed nonce.
	errOut, err = createNonce()
	t.Logf("create nonce replacing the consumed nonce: err=%v\n%s", err, errOut)
	// The administrator re-runs it (the error said to).
	errOut2, err2 := createNonce()
	t.Logf("create nonce, re-run: err=%v\n%s", err2, errOut2)
	close(stop)
	<-replenished
	<-attackerDone
	t.Logf("the create-only principal's liqo-nonce was created: %v", claimed.Load())

	require.NotContains(t, errOut+errOut2, planted, "liqoctl create nonce handed out a nonce a create-only principal chose")
	if s, getErr := current(); getErr == nil {
		require.NotEqual(t, planted, string(s.Data[wire.NonceField]), "the provider's nonce Secret holds the value a create-only principal chose")
	}
}
