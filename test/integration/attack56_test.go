package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack56FullSecretQuotaKeepsTheNonce: the provider's side of attack 54. EnsureNonce
// creates the nonce Secret first, unread, and read it only on AlreadyExists; a full Secret
// quota in the provider's tenant namespace refuses that create (403, before the name is
// looked at), so liqoctl create nonce (and authenticate) failed where the young nonce
// there could have been handed out again, and an old one replaced.
//
// The quota is filled by a principal that may only create Secrets in the tenant
// namespace (it never reads, writes or deletes liqo-nonce). Then:
//   - a re-run of create nonce hands out the young nonce that is there;
//   - a nonce that must be replaced is kept while its successor has no room, and the
//     error says a ResourceQuota is full and what to do;
//   - once there is room, the re-run replaces it, waiting for the resourcequota
//     controller to give back what its first create (refused as the name was taken) was
//     charged.
func TestAttack56FullSecretQuotaKeepsTheNonce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	np := newQuotaProvider(t, "attack56-provider")
	p, tn, createNonce := np.p, np.tn, np.createNonce
	current := func() *corev1.Secret {
		s, err := np.nonce()
		require.NoError(t, err)
		return s
	}
	errOut, err := createNonce()
	require.NoError(t, err, "the first create nonce:\n%s", errOut)
	first := current()

	// Setup, as the administrator: a Secret quota with room for two more.
	sq := newSecretQuota(t, p, tn, 2)

	// The attack: a principal that may only create Secrets fills the quota.
	w := principal(t, p, "secret-creator", tn, rule("", "secrets", "create"))
	fillSecretQuota(t, w, tn)

	// A re-run hands out the young nonce that is there.
	errOut, err = createNonce()
	require.NoError(t, err, "a re-run of create nonce, the young nonce there and the Secret quota full:\n%s", errOut)
	require.Equal(t, first.UID, current().UID, "the young nonce is kept")

	// A nonce that must be replaced (here its protocol label taken off, as a consumed or
	// expired one would be) is kept while there is no room for its successor: deleting it
	// would free a place in the quota for the principal that filled it, whose own nonce
	// the next run would find young and hand out (TestAttack57...). The error says what is
	// wrong and what to do.
	unlabelled := current()
	delete(unlabelled.Labels, wire.NonceLabel)
	require.NoError(t, p.client.Update(ctx, unlabelled))
	_, err = createNonce()
	require.ErrorContains(t, err, "a ResourceQuota of the namespace is full", "the error says what is wrong")
	require.ErrorContains(t, err, "re-run", "and what to do")
	t.Logf("create nonce with no room: %v", err)
	require.Equal(t, first.UID, current().UID, "the old nonce is kept while its successor has no room")

	// The administrator removes a filler, and the resourcequota controller (which this
	// control plane does not run: the test sets the quota's status as it would, from the
	// Secrets there) counts the room. The re-run's first create is refused as the name is
	// taken but still charged to the quota, so its replacement of the old nonce waits for
	// the controller to count again after the deletion, as it does on the deletion's event.
	require.NoError(t, p.client.Delete(ctx, secret(tn, "filler-0", nil, nil)))
	sq.recount()
	recounted := make(chan struct{})
	go func() {
		defer close(recounted)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var s corev1.Secret
			getErr := p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s)
			if apierrors.IsNotFound(getErr) || (getErr == nil && s.UID != first.UID) {
				sq.recount()
				return
			}
		}
	}()
	errOut, err = createNonce()
	<-recounted
	require.NoError(t, err, "create nonce once the quota has room:\n%s", errOut)
	second := current()
	require.NotEqual(t, first.UID, second.UID, "a new nonce Secret")
	require.Equal(t, "true", second.Labels[wire.NonceLabel])
}
