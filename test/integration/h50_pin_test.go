package integration

// helper-50 on a7c195e: generate tenant --remote-tenant-namespace replaces the manager's
// guess (pinnedByManager) of a Peering's legacy peering, under the check of the accepted
// Identity.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestH50IdentityWriterBlocksTheProvidersWordWithTheManagersGuess. The setting of
// TestAttack82: the consumer peered through a Peering, its administrator ran liqoctl
// unauthenticate, the provider's administrator moved the consumer's tenant namespace to N
// (adopted), the consumer peered again by hand (authenticate) and holds a slice whose copy
// is in N; its record is one a release before the pins wrote, and the manager pinned its
// guess, liqo-tenant-<consumer>, marked pinnedByManager. Since a7c195e the consumer's
// administrator replaces that guess with the provider administrator's word: liqoctl
// generate tenant --remote-tenant-namespace N (the identity controller's and the record's
// refusals advise it). An Identity writer of the consumer's tenant namespace (identities
// get, list, update; nothing else) moves every Identity there to the guess, which the
// identity controller then accepts (Ready): on a7c195e generate tenant's check of "the
// accepted Identity" refused N, the provider's word, and said the Identity was accepted
// before a handshake pinned (it was accepted under the manager's guess, a moment ago;
// helper-50's F1). What must
// hold: the administrator's run with the provider's word replaces the guess, or its
// refusal names a way out that keeps the peering (liqoctl authenticate with both
// kubeconfigs, which reads N from the provider), not only "confirm with the provider's
// administrator" (done: N is their word) or liqoctl unauthenticate (ends the peering).
func TestH50IdentityWriterBlocksTheProvidersWordWithTheManagersGuess(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const n, name = "h50-consumer-space", "slice-h50"

	pinHandMadeAfterAPeering(t, c, p, "h50a", n, name)
	def := wire.TenantNamespaceName(c.id)

	// The Identity writer moves every Identity to the default; the manager pins its guess.
	moveAll := pinMoveAllIdentities(t, c, p, "identity-writer-h50a", def)
	moveAll()
	eventually(t, 30*time.Second, "the manager pins its guess", func(context.Context) (bool, error) {
		return a81Record(t, c, p)["pinnedByManager"] == "true", nil
	})
	require.Equal(t, def, a77Pin(t, c, p))
	moveAll()
	idKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}
	eventually(t, 30*time.Second, "the moved control-plane Identity is accepted under the guess", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if err := c.client.Get(ctx, idKey, &id); err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		return ptr.Deref(id.Spec.Namespace, "") == def && ready != nil && ready.ObservedGeneration == id.Generation && ready.Status == metav1.ConditionTrue, nil
	})

	// The consumer's administrator: the provider's administrator says N (create nonce
	// prints it there); generate tenant with it, as the refusals advise.
	nonce := a79FreshNonce(t, c, p)
	_, errOut, err := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", nonce, "--remote-tenant-namespace", n)
	t.Logf("generate tenant --remote-tenant-namespace %s: err=%v\n%s", n, err, errOut)
	t.Logf("record after it: pin %q, pinnedByManager %q", a77Pin(t, c, p), a81Record(t, c, p)["pinnedByManager"])
	if err != nil {
		assert.Contains(t, err.Error(), "liqoctl authenticate",
			"an Identity writer's move to the manager's guess refuses the provider administrator's word, and the refusal's only ways out are a confirmation already given and liqoctl unauthenticate")
		assert.NotContains(t, err.Error(), "accepted before a handshake pinned", "the Identity was accepted under the manager's guess, after it was pinned")
	} else {
		assert.Equal(t, n, a77Pin(t, c, p))
	}

	// The way that does keep the peering: authenticate, which reads N from the provider.
	_, authOut, authErr := runCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("authenticate: err=%v\n%s", authErr, authOut)
	if assert.NoError(t, authErr, "authenticate replaces the guess with the provider's word") {
		assert.Equal(t, n, a77Pin(t, c, p))
		assert.NotEqual(t, "true", a81Record(t, c, p)["pinnedByManager"])
	}
}

// TestH50SliceWriterAloneRefusesTheDefaultWithAWorkableWayOut (brief item 3a). A manual
// handshake begun on a release before the pins (liqoctl generate tenant: the consumer's
// tenant namespace and its record, no pins, no Identity yet). A ResourceSlice writer of
// that namespace (resourceslices create there; nothing else) asks a slice of the
// provider. The consumer's administrator runs liqoctl generate tenant again, without
// --remote-tenant-namespace. The default is refused (by design: a slice may be a legacy
// peering's). What must hold: the way out the refusal names works, with no other step:
// --remote-tenant-namespace as liqoctl create nonce prints it on the provider.
func TestH50SliceWriterAloneRefusesTheDefaultWithAWorkableWayOut(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	def := wire.TenantNamespaceName(c.id)
	nonce := a79FreshNonce(t, c, p)
	mustCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", nonce)
	pinLegacyRecord(t, c, p)
	require.Empty(t, a77Pin(t, c, p), "setup: a record before the pins")

	writer := principal(t, c, "h50-slice-writer", wire.TenantNamespaceName(p.id), rule(authv1beta1.GroupVersion.Group, "resourceslices", "create"))
	require.NoError(t, writer.Create(ctx, localSlice(c, p, "h50-planted", "", "1")))

	_, errOut, err := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", nonce)
	t.Logf("generate tenant: err=%v\n%s", err, errOut)
	require.Error(t, err, "the default is refused while a slice of the provider is there")
	require.Contains(t, err.Error(), "--remote-tenant-namespace")
	assert.Empty(t, a77Pin(t, c, p), "a refused run pins nothing")

	_, createOut := mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	t.Logf("create nonce on the provider:\n%s", createOut)
	assert.Contains(t, createOut, "--remote-tenant-namespace "+def, "create nonce prints the namespace to pass")
	nonce = a79FreshNonce(t, c, p)
	_, errOut, err = runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", nonce, "--remote-tenant-namespace", def)
	require.NoError(t, err, "the way out the refusal names: %s", errOut)
	assert.Equal(t, def, a77Pin(t, c, p))
}
