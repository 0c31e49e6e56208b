package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// The nonce's consumption is written only to the tenant record (the manager no longer
// marks the nonce Secret): these tests act as the weakest principals that write what the
// nonce readers (EnsureNonce: create nonce and authenticate; GetNonce: get nonce) and the
// tenant controller read, and try to have a consumed nonce handed out again or accepted
// for another key.

// nonceProvider is one provider with its controllers in-process.
func nonceProvider(t *testing.T) *site {
	t.Helper()
	p := installSites(t, testenv.New(t, "nonce-provider"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	return p
}

// victimID is the consumer whose handshake the attacks start from.
const victimID = "cl-victim"

// acceptedHandshake runs an honest handshake of victimID (administrator's nonce, the
// consumer's Tenant) and returns its tenant namespace, the consumed nonce and its
// Secret's UID.
func acceptedHandshake(t *testing.T, p *site) (tn, nonce string, uid string) {
	const id = victimID
	t.Helper()
	ctx := context.Background()
	a := newAttacker(t, id)
	tn, nonce = freshNonce(t, p, id)
	tenant := a.honestTenant(t, tn, nonce)
	require.NoError(t, p.client.Create(ctx, tenant))
	waitTenantCondition(t, p, client.ObjectKeyFromObject(tenant), authv1beta1.ConditionReady, metav1.ConditionTrue, "Ready")
	var s corev1.Secret
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s))
	require.Equal(t, nonce, string(s.Data[wire.NonceField]))
	return tn, nonce, string(s.UID)
}

func sideOf(c client.WithWatch) *handshake.Side {
	return &handshake.Side{Scope: "remote", Client: c, Namespace: wire.DefaultLiqoNamespace}
}

func nonceSecret(tn, id, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName,
		Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: id},
		Annotations: map[string]string{wire.NonceIssuedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{wire.NonceField: []byte(value)}}
}

// replaceNonce deletes the nonce Secret (if any) and creates one holding value, as w.
func replaceNonce(t *testing.T, w client.Client, tn, value string) {
	const id = victimID
	t.Helper()
	ctx := context.Background()
	err := w.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName}})
	require.NoError(t, client.IgnoreNotFound(err))
	s := nonceSecret(tn, id, value)
	require.Eventually(t, func() bool { return !apierrors.IsAlreadyExists(w.Create(ctx, s)) }, 5*time.Second, 20*time.Millisecond)
	require.NotEmpty(t, s.UID, "created")
}

// overwriteNonce writes, as w, a new value over the nonce in its Secret (whose UID is uid,
// and stays), and returns the value.
func overwriteNonce(t *testing.T, w client.Client, tn, uid string) string {
	t.Helper()
	var s corev1.Secret
	require.NoError(t, w.Get(context.Background(), client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s))
	nx := newNonce(t)
	s.Data = map[string][]byte{wire.NonceField: []byte(nx)}
	require.NoError(t, w.Update(context.Background(), &s))
	require.Equal(t, uid, string(s.UID))
	return nx
}

func newNonce(t *testing.T) string {
	n, err := authn.NewNonce()
	require.NoError(t, err)
	return n
}

// swapTenant deletes the consumer's Tenant and creates tenant instead, as w (a Tenant
// writer of the tenant namespace: what a peering user is).
func swapTenant(t *testing.T, p *site, w client.Client, tenant *authv1beta1.Tenant) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(tenant)
	require.NoError(t, client.IgnoreNotFound(w.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})))
	eventually(t, 10*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, key, &authv1beta1.Tenant{})), nil
	})
	require.NoError(t, w.Create(ctx, tenant))
}

// TestNonceAttackConsumedNonceNotHandedOutAgain: as a Secret writer of the tenant
// namespace, after a handshake consumed nonce N1, put N1 back in a new Secret, or write
// another value over it in its Secret; get nonce refuses both, create nonce (EnsureNonce)
// replaces both; and N1, signed by another key in a re-created Tenant (a Tenant writer),
// is refused NonceConsumed.
func TestNonceAttackConsumedNonceNotHandedOutAgain(t *testing.T) {
	t.Parallel()
	p := nonceProvider(t)
	ctx := context.Background()
	const id = victimID
	tn, n1, uid1 := acceptedHandshake(t, p)
	admin := sideOf(p.client)
	sw := principal(t, p, "nonce-secret-writer", tn, rule("", "secrets", "get", "create", "update", "delete"))
	tw := principal(t, p, "nonce-tenant-writer", tn, rule("authentication.liqo.io", "tenants", "get", "create", "delete"))

	_, _, err := handshake.GetNonce(ctx, admin, id)
	require.Error(t, err, "the consumed nonce, as the handshake left it")
	assert.Contains(t, err.Error(), "already used")

	// Another value written over the consumed one, in its Secret (the SecretUID rule).
	nx := overwriteNonce(t, sw, tn, uid1)
	_, _, err = handshake.GetNonce(ctx, admin, id)
	require.Error(t, err, "a value written over the consumed nonce in its Secret")
	assert.Contains(t, err.Error(), "already used")
	got, err := handshake.EnsureNonce(ctx, admin, tn, id, time.Now())
	require.NoError(t, err)
	assert.True(t, got.Created, "replaced")
	assert.NotEqual(t, nx, got.Value)
	assert.NotEqual(t, n1, got.Value)

	// The consumed value, put back in a new Secret.
	replaceNonce(t, sw, tn, n1)
	_, _, err = handshake.GetNonce(ctx, admin, id)
	require.Error(t, err, "the consumed value in a new Secret")
	assert.Contains(t, err.Error(), "already used")
	got, err = handshake.EnsureNonce(ctx, admin, tn, id, time.Now())
	require.NoError(t, err)
	assert.True(t, got.Created, "replaced")
	assert.NotEqual(t, n1, got.Value)

	// And presented, signed by another key, in a re-created Tenant.
	replaceNonce(t, sw, tn, n1)
	mallory := newAttacker(t, id)
	stolen := mallory.honestTenant(t, tn, n1)
	swapTenant(t, p, tw, stolen)
	expectRefused(t, p, stolen, string(authv1beta1.ReasonNonceConsumed))
}

// TestNonceAttackForbiddenRecordReader: a peering user of the old kind, whose credentials
// may not read the tenant record (no configmaps get), asks for a nonce after a handshake
// consumed N1. The record alone says N1 is consumed and it cannot read it: create nonce
// replaces N1, as it would a consumed one, and get nonce prints the fresh one (with a
// warning that it cannot vouch for it). N1 signed by another key, in a Tenant that peering
// user re-creates, is refused NonceConsumed, and create nonce, which the refusal tells the
// user to run, never hands N1 out again. (The first version of the change, which took an
// unreadable record for "not consumed", handed N1 out again until NonceReuseWindow passed.)
func TestNonceAttackForbiddenRecordReader(t *testing.T) {
	t.Parallel()
	p := nonceProvider(t)
	ctx := context.Background()
	const id = victimID
	tn, n1, _ := acceptedHandshake(t, p)
	// The peering user's rules in the tenant namespace, as pkg/access grants them, and
	// reading its namespace; nothing in the Liqo namespace.
	user := wire.PeeringUserPrefix + id + "-oldstyle"
	old := principal(t, p, user, tn, access.PeeringUserTenantRules(id)...)
	nsRule := rule("", "namespaces", "get")
	nsRule.ResourceNames = []string{tn}
	_ = principal(t, p, user, "", nsRule) // the same user: a ClusterRole beside its Role
	var cm corev1.ConfigMap
	err := old.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(id)}, &cm)
	require.True(t, apierrors.IsForbidden(err), "the old kind may not read the record: %v", err)
	side := sideOf(old)

	// create nonce cannot tell whether N1 was consumed: it replaces it, as a consumed one.
	got, err := handshake.EnsureNonce(ctx, side, tn, id, time.Now())
	require.NoError(t, err)
	assert.True(t, got.Created, "a nonce nobody can vouch for is replaced")
	assert.NotEqual(t, n1, got.Value, "create nonce hands out the nonce a handshake consumed")
	v, _, err := handshake.GetNonce(ctx, side, id)
	require.NoError(t, err)
	assert.Equal(t, got.Value, v, "get nonce prints the fresh one")

	// Whatever it was handed, N1 signed by another key is refused.
	replaceNonce(t, old, tn, n1)
	mallory := newAttacker(t, id)
	stolen := mallory.honestTenant(t, tn, n1)
	swapTenant(t, p, old, stolen)
	expectRefused(t, p, stolen, string(authv1beta1.ReasonNonceConsumed))

	// The refusal says: start a new handshake (liqoctl create nonce, or authenticate).
	got, err = handshake.EnsureNonce(ctx, side, tn, id, time.Now())
	require.NoError(t, err)
	assert.NotEqual(t, n1, got.Value, "create nonce hands out the nonce a handshake consumed")
}

// TestNonceAttackRaceEnsureNonce: while a Secret writer of the tenant namespace keeps
// deleting the nonce and re-creating it with the consumed value, or labelled for another
// consumer, the administrator's create nonce either fails, saying so, or returns a nonce
// of its own (made now, or a young one it made before): never the consumed one nor the
// writer's, and it never loops.
func TestNonceAttackRaceEnsureNonce(t *testing.T) {
	// Serial: a flood of deletes and creates, and a 5 s deadline on each create nonce beside it.
	p := nonceProvider(t)
	const id = victimID
	tn, n1, _ := acceptedHandshake(t, p)
	sw := principal(t, p, "nonce-racer", tn, rule("", "secrets", "get", "create", "update", "delete"))
	foreign := newNonce(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = sw.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName}})
			s := nonceSecret(tn, id, n1)
			if i%2 == 1 {
				s = nonceSecret(tn, "cl-other", foreign)
			}
			_ = sw.Create(ctx, s)
		}
	})
	admin := sideOf(p.client)
	var fails int
	own := map[string]bool{} // what create nonce made: a young one of them may be kept
	for range 40 {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := handshake.EnsureNonce(cctx, admin, tn, id, time.Now())
		ccancel()
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded, "EnsureNonce never returned")
			fails++
			t.Logf("create nonce failed: %v", err)
			continue
		}
		require.NotEqual(t, n1, got.Value, "the consumed nonce handed out again")
		require.NotEqual(t, foreign, got.Value, "the writer's nonce for another consumer handed out")
		if got.Created {
			own[got.Value] = true
		} else {
			require.True(t, own[got.Value], "a nonce kept that no create nonce made")
		}
	}
	cancel()
	wg.Wait()
	t.Logf("create nonce failed %d times of 40 under the race", fails)
}

// TestNonceAttackRewrittenValueAtTheController: the readers refuse a value written over
// the consumed nonce in its Secret (the record's SecretUID); does the tenant controller?
// As a Secret writer and a Tenant writer of the tenant namespace (a peering user is
// both): write Nx over the consumed nonce, in its Secret, and present Nx signed by another
// key in a re-created Tenant.
func TestNonceAttackRewrittenValueAtTheController(t *testing.T) {
	t.Parallel()
	p := nonceProvider(t)
	const id = victimID
	tn, _, uid1 := acceptedHandshake(t, p)
	sw := principal(t, p, "nonce-secret-writer", tn, rule("", "secrets", "get", "create", "update", "delete"))
	tw := principal(t, p, "nonce-tenant-writer", tn, rule("authentication.liqo.io", "tenants", "get", "create", "delete"))
	nx := overwriteNonce(t, sw, tn, uid1)
	mallory := newAttacker(t, id)
	tenant := mallory.honestTenant(t, tn, nx)
	swapTenant(t, p, tw, tenant)
	eventually(t, 15*time.Second, "a verdict", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(tenant), tenant)
		c := meta.FindStatusCondition(tenant.Status.Conditions, authv1beta1.ConditionAuthenticated)
		return c != nil, err
	})
	c := meta.FindStatusCondition(tenant.Status.Conditions, authv1beta1.ConditionAuthenticated)
	t.Logf("verdict on a value written over the consumed nonce, in its Secret: %s %s: %s", c.Status, c.Reason, c.Message)
	// The tenant controller does not apply the SecretUID rule (only the readers do): the
	// handshake is accepted, certifying mallory's own key. It gains nothing: the same two
	// principals make a fresh handshake of any key of theirs by deleting the Secret and
	// creating a new one (a new UID), as below. If the controller comes to refuse the
	// rewritten value, this expectation flips to NonceConsumed.
	assert.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	eve := newAttacker(t, id)
	fresh := newNonce(t)
	replaceNonce(t, sw, tn, fresh)
	tenant = eve.honestTenant(t, tn, fresh)
	swapTenant(t, p, tw, tenant)
	waitTenantCondition(t, p, client.ObjectKeyFromObject(tenant), authv1beta1.ConditionAuthenticated, metav1.ConditionTrue, string(authv1beta1.ReasonHandshakeAccepted))
}
