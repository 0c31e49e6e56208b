package integration

// Attacks after attack35 on issue 35 (declared peerings, the approval gate, a peering
// user retiring itself, a consumer leaving), each acting as the weakest principal that
// could try it. A test marked FINDING fails on the code it attacks: it states what
// should hold.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack35bIdentityDeleterMakesThePeeringLeaveNothing (finding of attack35b, fixed): a declared Peering
// has peered. An Identity writer of the consumer's tenant namespace (it may delete
// Identities there) deletes the provider's Identity; the consumer's administrator then
// deletes the Peering, to leave the provider. operations.md says the finalizer goes once
// leaving is proven; handshake.Leave, finding no Identity, says there is nothing to
// leave, and the finalizer goes at once: the provider keeps the consumer's Tenant, its
// access and its certificate, and nothing tells the administrator.
func TestAttack35bIdentityDeleterMakesThePeeringLeaveNothing(t *testing.T) {
	t.Parallel()
	c, p, pe := peeredSites(t)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(p.id)
	deleter := principal(t, c, "identity-deleter", tn, rule("authentication.liqo.io", "identities", "get", "delete"))
	require.NoError(t, deleter.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metaOf(tn, wire.IdentityName(p.id))}))

	require.NoError(t, c.client.Delete(ctx, pe), "the consumer's administrator deletes the Peering to leave the provider")
	gone := false
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !gone {
		gone = apierrors.IsNotFound(c.client.Get(ctx, client.ObjectKeyFromObject(pe), &authv1beta1.Peering{}))
		time.Sleep(200 * time.Millisecond)
	}
	if !gone {
		// The finalizer waits, what operations.md promises, and the Peering says why and
		// what the provider's administrator runs.
		var cur authv1beta1.Peering
		require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(pe), &cur))
		ready := meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, authv1beta1.ReasonPeeringLeaveFailed, ready.Reason)
		assert.Contains(t, ready.Message, "liqoctl unauthenticate --remote-cluster-id "+c.id)
		return
	}
	var tenant authv1beta1.Tenant
	err := p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &tenant)
	assert.True(t, apierrors.IsNotFound(err),
		"the Peering's finalizer went (\"leaving proven\"), and the provider still holds the consumer's Tenant (certificate %v): %v", certOf(&tenant), err)
}

// certOf is the serial of a Tenant's published certificate ("" without one).
func certOf(t *authv1beta1.Tenant) string {
	if t.Status.Certificate == nil {
		return ""
	}
	return t.Status.Certificate.SerialNumber
}

// TestAttack35bPeeringUserDeletesAnotherNamespacesRole (finding of attack35b, fixed): a peering user may
// delete Roles named liqo-peering-user-<its consumer> to retire itself; its ClusterRole
// grants that by name only, in every namespace. Acting with its real certificate, the
// peering user of consumer C deletes a Role of that name in a namespace that is neither
// its consumer's tenant namespace nor the Liqo namespace (a team's namespace, whose Role
// happens to bear the name): the peering user deletes what is not its own.
func TestAttack35bPeeringUserDeletesAnotherNamespacesRole(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	peer := newClient(t, restConfigFromKubeconfig(t, []byte(kubeconfig)))

	const team = "team-a"
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))
	name := wire.PeeringUserClusterObjectName(c.id)
	role := &rbacv1.Role{ObjectMeta: metaOf(team, name),
		Rules: []rbacv1.PolicyRule{rule("", "configmaps", "get")}}
	require.NoError(t, p.client.Create(ctx, role), "a team's Role, named alike, not the peering user's")

	err := peer.Delete(ctx, role.DeepCopy())
	assert.True(t, apierrors.IsForbidden(err), "the peering user of %s deletes Role %s/%s, not its own: %v", c.id, team, name, err)
	assert.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.Role{}), "the team's Role is still there")
}
