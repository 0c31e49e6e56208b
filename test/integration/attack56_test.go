package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
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
//   - a nonce that must be replaced (here its protocol label taken off, as a consumed or
//     expired one would be) is deleted and its successor created once the resourcequota
//     controller has given its room back (this control plane runs none: the test does
//     its job on the deletion, as it would);
//   - when no room comes back, the error says a ResourceQuota is full and what to do.
func TestAttack56FullSecretQuotaKeepsTheNonce(t *testing.T) {
	ctx := context.Background()
	p := installSites(t, testenv.New(t, "attack56-provider"), "cl-provider")[0]
	const consumerID = "cl-consumer"
	tn := wire.TenantNamespaceName(consumerID)
	createNonce := func() (string, error) {
		_, errOut, err := runCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", consumerID)
		return errOut, err
	}
	current := func() *corev1.Secret {
		var s corev1.Secret
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s))
		return &s
	}
	errOut, err := createNonce()
	require.NoError(t, err, "the first create nonce:\n%s", errOut)
	first := current()

	// Setup, as the administrator: a Secret quota with room for two more, its status set as
	// the resourcequota controller would set it.
	var secrets corev1.SecretList
	require.NoError(t, p.client.List(ctx, &secrets, client.InNamespace(tn)))
	inUse := int64(len(secrets.Items))
	hard := corev1.ResourceList{corev1.ResourceSecrets: *resource.NewQuantity(inUse+2, resource.DecimalSI)}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "secrets"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	require.NoError(t, p.client.Create(ctx, q))
	setUsed := func(n int64) {
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(q), q))
		q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourceSecrets: *resource.NewQuantity(n, resource.DecimalSI)}}
		require.NoError(t, p.client.Status().Update(ctx, q))
	}
	setUsed(inUse)

	// The attack: a principal that may only create Secrets fills the quota.
	w := principal(t, p, "secret-creator", tn, rule("", "secrets", "create"))
	filled := false
	for i := 0; i < 10 && !filled; i++ {
		createErr := w.Create(ctx, secret(tn, fmt.Sprintf("filler-%d", i), nil, map[string][]byte{"x": []byte("x")}))
		if createErr != nil {
			require.True(t, apierrors.IsForbidden(createErr) && strings.Contains(createErr.Error(), "exceeded quota"), "the filler is refused by the quota: %v", createErr)
			filled = true
		}
	}
	require.True(t, filled, "the quota is full")
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(q), q))
	full := q.Status.Used[corev1.ResourceSecrets]

	// A re-run hands out the young nonce that is there.
	errOut, err = createNonce()
	require.NoError(t, err, "a re-run of create nonce, the young nonce there and the Secret quota full:\n%s", errOut)
	require.Equal(t, first.UID, current().UID, "the young nonce is kept")

	// A nonce that must be replaced: deleted, and its successor created once the room comes
	// back, which the resourcequota controller gives on the deletion.
	unlabel := func() {
		s := current()
		delete(s.Labels, wire.NonceLabel)
		require.NoError(t, p.client.Update(ctx, s))
	}
	unlabel()
	replenished := make(chan struct{})
	go func() {
		defer close(replenished)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var s corev1.Secret
			getErr := p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s)
			if apierrors.IsNotFound(getErr) || (getErr == nil && s.UID != first.UID) {
				var cur corev1.ResourceQuota
				if p.client.Get(ctx, client.ObjectKeyFromObject(q), &cur) == nil {
					cur.Status.Used = corev1.ResourceList{corev1.ResourceSecrets: *resource.NewQuantity(full.Value()-1, resource.DecimalSI)}
					_ = p.client.Status().Update(ctx, &cur)
				}
				return
			}
		}
	}()
	errOut, err = createNonce()
	<-replenished
	require.NoError(t, err, "create nonce replacing a nonce under a full Secret quota:\n%s", errOut)
	second := current()
	require.NotEqual(t, first.UID, second.UID, "a new nonce Secret")
	require.Equal(t, "true", second.Labels[wire.NonceLabel])

	// No room comes back (the quota's status says full): a clear error, and a re-run once
	// there is room creates the nonce.
	setUsed(full.Value())
	unlabel2 := current()
	delete(unlabel2.Labels, wire.NonceLabel)
	require.NoError(t, p.client.Update(ctx, unlabel2))
	_, err = createNonce()
	require.Error(t, err)
	require.ErrorContains(t, err, "a ResourceQuota of the namespace is full", "the error says what is wrong")
	require.ErrorContains(t, err, "re-run", "and what to do")
	t.Logf("create nonce with no room: %v", err)
	setUsed(full.Value() - 1)
	errOut, err = createNonce()
	require.NoError(t, err, "create nonce once the quota has room:\n%s", errOut)
	third := current()
	require.NotContains(t, []types.UID{first.UID, second.UID}, third.UID)
}
