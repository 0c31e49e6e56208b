package integration

// Attack 81 (helper-47 on 3f9c7b7 and f266eca). 3f9c7b7: the consumer's manager pins, in
// the record of a peering a Peering made before the pins, liqo-tenant-<consumer> and "no
// proxy" (pinLegacy), whenever an Identity of the provider is found and the record lists
// a bootstrap credential the Peering used. f266eca: liqoctl generate tenant, with no
// namespace pinned, refuses the default while any Identity of the provider names another.
// Both decide from what an Identity writer of the consumer's tenant namespace writes.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// a81Record is c's tenant record of p, as its data.
func a81Record(t *testing.T, c, p *site) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm))
	return cm.Data
}

// TestAttack81GenerateTenantTrustsIdentitiesMovedToTheDefault (f266eca). The provider
// keeps the consumer's tenant namespace in N (adopted by its administrator); the consumer
// peered with liqoctl authenticate and holds an accepted slice whose copy is in N; its
// record is one a release before the namespace pin wrote. An Identity writer of the
// consumer's tenant namespace (identities get, list, update; nothing else) moves every
// Identity of the provider to the default namespace, liqo-tenant-<consumer>: with no pin
// the identity controller takes it, and no Identity names "another" any more. The
// consumer's administrator runs liqoctl generate tenant with a fresh nonce and no
// --remote-tenant-namespace. What must hold: the run does not pin a namespace the
// provider does not keep this cluster in (the check exists for that), or at least
// liqoctl delete resourceslice never says "verified" while the slice identity still reads
// its copy in N.
func TestAttack81GenerateTenantTrustsIdentitiesMovedToTheDefault(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const n, name = "a81-consumer-space", "slice-a81"
	kc := pinAdoptedPeering(t, c, p, n, name)
	cTN := wire.TenantNamespaceName(p.id)
	// A record as a release before the pin wrote it.
	a77Unpin(t, c, p)

	// The Identity writer: every Identity of the provider now names the default.
	def := wire.TenantNamespaceName(c.id)
	moveAll := pinMoveAllIdentities(t, c, p, "identity-writer-a81", def)
	moveAll()
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	eventually(t, 30*time.Second, "the moved control-plane Identity is decided", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if err := c.client.Get(ctx, idKey, &id); err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == id.Generation, nil
	})
	moveAll() // a controller that wrote a slice Identity back in the meantime
	var ids authv1beta1.IdentityList
	require.NoError(t, c.client.List(ctx, &ids, client.InNamespace(cTN)))
	for _, id := range ids.Items {
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		t.Logf("Identity %s names %q; Ready: %v", id.Name, ptr.Deref(id.Spec.Namespace, ""), ready)
	}

	// The consumer's administrator: a new handshake by hand (no --remote-tenant-namespace).
	_, errOut, genErr := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", a79FreshNonce(t, c, p))
	t.Logf("generate tenant: err=%v\n%s", genErr, errOut)
	pinned := a77Pin(t, c, p)
	t.Logf("pin after generate tenant: %q (the provider keeps this cluster in %q)", pinned, n)
	assert.False(t, genErr == nil && pinned != n, "generate tenant pinned %q while the provider keeps this cluster in %q: an Identity writer moved every Identity to the default, and the check took them at their word", pinned, n)

	pinDeleteSliceNeverFalselyVerified(t, c, p, n, name, kc)
}

// TestAttack81PlantedIdentityRepinsAnUnauthenticatedPeering (3f9c7b7). The consumer peered
// through a Peering, then its administrator ran liqoctl unauthenticate (the Peering left in
// place, its bootstrap credential spent): the Identity is gone and the pins are forgotten
// ("a new peering chooses its own"). An Identity writer of the consumer's tenant namespace
// (identities get, create; nothing else), who kept a copy of the old Identity, creates it
// again. What must hold: the manager pins nothing for a peering that no longer exists,
// and the administrator's next handshake, through a proxy, is not refused for a pin no
// handshake made.
func TestAttack81PlantedIdentityRepinsAnUnauthenticatedPeering(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pe := pinPeeredByAPeering(t, c, p, "a81")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer-a81b", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "create"))
	var kept authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &kept))

	// The administrator ends the peering with liqoctl (the Peering stays).
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	rec := a81Record(t, c, p)
	_, proxyPinned := rec["proxyURL"]
	require.False(t, proxyPinned || rec["providerTenantNamespace"] != "", "setup: unauthenticate forgot the pins (%v)", rec)
	require.NotEmpty(t, rec["peering"], "setup: the record still says which Peering peered")

	// The writer puts the old Identity back.
	planted := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: kept.Name, Labels: kept.Labels}, Spec: kept.Spec}
	require.NoError(t, writer.Create(ctx, planted))

	var pinnedBy string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		rec = a81Record(t, c, p)
		if _, ok := rec["proxyURL"]; ok || rec["providerTenantNamespace"] != "" {
			pinnedBy = strings.Join(peeringEvents(t, c.client, pe.Name), "\n")
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("record after the planted Identity: providerTenantNamespace=%q proxyURL present=%v", rec["providerTenantNamespace"], func() bool { _, ok := rec["proxyURL"]; return ok }())
	_, proxyPinned = rec["proxyURL"]
	assert.False(t, proxyPinned || rec["providerTenantNamespace"] != "",
		"an Identity writer's planted Identity had the manager pin a peering that unauthenticate ended (Peering events:\n%s)", pinnedBy)

	// The administrator's next handshake, through a proxy: its dry run.
	out, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--dry-run", "--tenant-proxy-url", "http://a81-proxy.invalid:3128")...)
	t.Logf("authenticate --dry-run --tenant-proxy-url: err=%v\n%s\n%s", err, errOut, out)
	assert.NoError(t, err, "the administrator's new handshake is refused for a pin no handshake made")
}
