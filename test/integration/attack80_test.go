package integration

// Attack 80 (helper-44's F2): a peering declared with a Peering before the consumer pinned
// its tenant namespace on the provider was never pinned: the Peering stops once peered,
// and its peering user is retired, so no handshake of its own ran again. An Identity
// writer's spec.namespace then decided where the consumer's slice controller and a slice's
// deletion look for the slices' copies.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack80PeeringOlderThanThePinIsPinned: the consumer peered through a Peering; its
// record's namespace pin is removed (a record from before the pin). An Identity writer of
// the consumer's tenant namespace (identities get, update) moves the control-plane
// Identity's spec.namespace. What must hold: the consumer's manager pins the tenant
// namespace the Peering's handshake used (the protocol's: a peering user reaches no
// other), and the moved Identity is refused for it.
func TestAttack80PeeringOlderThanThePinIsPinned(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	pe := pinPeeredByAPeering(t, c, p, "a80")
	pTN := wire.TenantNamespaceName(c.id)
	pinLegacyRecord(t, c, p)

	write := a77IdentityWriter(t, c, p, "identity-writer-a80")
	write(func(id *authv1beta1.Identity) { id.Spec.Namespace = ptr.To("default") })
	idKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}
	var ready *metav1.Condition
	eventually(t, 30*time.Second, "the moved Identity is refused once the Peering's peering is pinned", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if err := c.client.Get(ctx, idKey, &id); err != nil {
			return false, err
		}
		ready = meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == id.Generation && ready.Reason == "TenantNamespaceNotPinned", nil
	})
	t.Logf("refusal: %s: %s", ready.Reason, ready.Message)
	assert.Equal(t, pTN, a77Pin(t, c, p), "the manager pinned the namespace the Peering's handshake used")
	assert.Equal(t, "true", a81Record(t, c, p)["pinnedOnce"], "once: an unpin or unauthenticate later is never undone by the manager")
	eventually(t, 10*time.Second, "the Peering says it was pinned", func(context.Context) (bool, error) {
		return strings.Contains(strings.Join(peeringEvents(t, c.client, pe.Name), "\n"), "is pinned to what its handshake used: tenant namespace "+pTN), nil
	})
}

// TestGenerateTenantWithTheProvidersNamespaceReplacesTheManagersGuess: the manager pinned a
// Peering's peering older than the pins to liqo-tenant-<consumer>, as its guess
// (pinnedByManager): no proof says "verified" on it. The consumer's administrator runs the
// manual flow: without --remote-tenant-namespace it is held to the guess, which stays a
// guess; with the namespace the provider's administrator gives (create nonce prints it),
// the guess is replaced by that word, as liqoctl authenticate replaces it with the
// provider's (before: generate tenant kept the record marked as the manager's guess, and
// only authenticate could ever replace it).
func TestGenerateTenantWithTheProvidersNamespaceReplacesTheManagersGuess(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	pinPeeredByAPeering(t, c, p, "a80g")
	pTN := wire.TenantNamespaceName(c.id)
	pinLegacyRecord(t, c, p)
	// As after an upgrade, the Peering's controller looks again (a manager's start does;
	// here, a change of its Identity).
	idKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if err := c.client.Get(context.Background(), idKey, &id); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&id.ObjectMeta, "test.example/touch", "1")
		return c.client.Update(context.Background(), &id)
	}))
	eventually(t, 30*time.Second, "the manager pins its guess", func(context.Context) (bool, error) {
		return a81Record(t, c, p)["pinnedByManager"] == "true", nil
	})
	require.Equal(t, pTN, a77Pin(t, c, p))

	C, P := []string{"--kubeconfig", c.cp.Kubeconfig}, []string{"--kubeconfig", p.cp.Kubeconfig}
	_, createOut := mustCLI(t, append([]string{"create", "nonce", "--remote-cluster-id", c.id}, P...)...)
	require.Contains(t, createOut, "--remote-tenant-namespace "+pTN, "create nonce names the namespace, the protocol's too")
	nonce, _ := mustCLI(t, append([]string{"get", "nonce", "--remote-cluster-id", c.id}, P...)...)
	generate := func(flags ...string) {
		t.Helper()
		mustCLI(t, append(append([]string{"generate", "tenant", "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce)}, flags...), C...)...)
	}

	generate() // the default, which is the guess
	assert.Equal(t, pTN, a77Pin(t, c, p))
	assert.Equal(t, "true", a81Record(t, c, p)["pinnedByManager"], "without the provider's word the guess stays a guess")

	generate("--remote-tenant-namespace", pTN)
	assert.Equal(t, pTN, a77Pin(t, c, p))
	assert.NotEqual(t, "true", a81Record(t, c, p)["pinnedByManager"], "the administrator's word replaced the manager's guess")
}
