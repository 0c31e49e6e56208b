package integration

// Attack 77b (helper-43 on 8fdccb9): handshake.ForgeIdentity copies the Identity's
// spec.namespace from the Tenant's status.tenantNamespace, which a Tenant status writer
// of the provider's tenant namespace (tenants/status update) writes; the handshake pins
// the namespace it ensured itself (the provider's record). Where no manager runs on the
// provider, nothing puts the status back before liqoctl authenticate reads it.

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
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack77TenantStatusWriterNamesTheIdentitysNamespace: the consumer peered with
// liqoctl authenticate (no manager on the provider: its controllers run in-process for
// each command). A Tenant status writer of the provider's tenant namespace writes
// status.tenantNamespace "default". The consumer's administrator then redoes the Identity
// (deleted, then liqoctl authenticate again, as TestCLIAuthenticateInProcess does). What
// must hold: the handshake succeeds and the Identity names the provider's real tenant
// namespace (the one it ensured and pinned), never the status writer's; a later leave
// deletes the real Tenant.
func TestAttack77TenantStatusWriterNamesTheIdentitysNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)

	writer := principal(t, p, "tenant-status-writer-a77", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn))
	tn.Status.TenantNamespace = "default"
	require.NoError(t, writer.Status().Update(ctx, &tn))

	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	require.NoError(t, c.client.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metaOf(cTN, wire.IdentityName(p.id))}))
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--timeout", "45s")...)
	t.Logf("authenticate again: err=%v\n%s", err, errOut)
	var id authv1beta1.Identity
	if getErr := c.client.Get(ctx, idKey, &id); getErr == nil {
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		if ready != nil {
			t.Logf("Identity spec.namespace=%q Ready=%s %s: %s", ptr.Deref(id.Spec.Namespace, ""), ready.Status, ready.Reason, ready.Message)
		}
	}
	assert.NoError(t, err, "the handshake redone, a Tenant status writer having written status.tenantNamespace")
	assert.Equal(t, pTN, ptr.Deref(id.Spec.Namespace, ""), "the Identity names the provider's real tenant namespace, not the status writer's")
	assert.NotContains(t, errOut, "forget the pin", "the pin is right: removing it is no remedy")

	// The provider's manager, for the Tenant's finalize at leave.
	startManager(t, p)
	_, errOut, err = runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--timeout", "60s")
	a77AssertLeft(t, c, p, errOut, err)
}

// TestAttack77GenerateTenantPinAdviceHolds: usability, no attacker. The consumer's
// administrator runs liqoctl generate tenant for a provider without
// --remote-tenant-namespace (the provider's administrator had in fact adopted another
// namespace): it pins liqo-tenant-<consumer>. Run again with the right
// --remote-tenant-namespace, it is refused with advice that says "liqoctl unauthenticate
// forgets it too". What must hold: after liqoctl unauthenticate --remote-cluster-id P
// (this cluster alone: no Identity was ever applied), generate tenant with the right
// namespace succeeds.
func TestAttack77GenerateTenantPinAdviceHolds(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	C, P := []string{"--kubeconfig", c.cp.Kubeconfig}, []string{"--kubeconfig", p.cp.Kubeconfig}
	mustCLI(t, append([]string{"create", "nonce", "--remote-cluster-id", c.id}, P...)...)
	nonce, _ := mustCLI(t, append([]string{"get", "nonce", "--remote-cluster-id", c.id}, P...)...)
	gen := append([]string{"generate", "tenant", "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce)}, C...)
	mustCLI(t, gen...)
	require.Equal(t, wire.TenantNamespaceName(c.id), a77Pin(t, c, p), "setup: generate tenant pinned the protocol's namespace")

	right := append(append([]string{}, gen...), "--remote-tenant-namespace", "a77-space")
	_, errOut, err := runCLI(t, right...)
	t.Logf("generate tenant --remote-tenant-namespace a77-space: err=%v\n%s", err, errOut)
	require.Error(t, err, "setup: another namespace than the pinned one is refused")
	t.Logf("advice: %v", err)

	_, errOut, err = runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	t.Logf("unauthenticate --remote-cluster-id: err=%v\n%s", err, errOut)
	t.Logf("pin after unauthenticate: %q", a77Pin(t, c, p))
	_, errOut, err = runCLI(t, right...)
	t.Logf("generate tenant again: err=%v\n%s", err, errOut)
	assert.NoError(t, err, "the advice said liqoctl unauthenticate forgets the pin too")
}

// TestAttack77RefusalAdviceReopensF7WithACustomNamespace: helper-39's F7 again, through
// the refusal's advice. The provider keeps the consumer's tenant namespace in N (adopted by
// its administrator); the consumer peers with liqoctl authenticate (pin: N) and holds an
// accepted slice whose copy is in N. An Identity writer moves the control-plane Identity's
// spec.namespace to "default"; the identity controller refuses it, advising "forget the
// pin with kubectl patch ... and run the handshake again". The administrator follows it:
// the pin goes, the writer touches the Identity (accepted, with no pin), liqoctl
// authenticate says "nothing to do". Then liqoctl delete resourceslice. What must hold:
// never "Access of the slice's identity revoked: verified" while the slice identity still
// reads its copy in N.
func TestAttack77RefusalAdviceReopensF7WithACustomNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const n, name = "a77-consumer-space", "slice-a77"
	startManager(t, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: cluster.TenantNamespaceLabels(c.id)}}))
	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--adopt-tenant-namespace", "--kubeconfig", p.cp.Kubeconfig)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)
	require.Equal(t, n, a77Pin(t, c, p), "setup: authenticate pinned %s", n)
	cTN := wire.TenantNamespaceName(p.id)
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, name, "", "1")))
	kc := sliceKubeconfig(t, c, p, name)
	require.True(t, a76ReadsCopyIn(t, kc, n, name), "setup: the slice identity reads its copy in %s", n)

	write := a77IdentityWriter(t, c, p, "identity-writer-a77f")
	id := a77MoveThenUnpin(t, c, p, write, idKey)
	eventually(t, 30*time.Second, "the moved Identity, with no pin, is decided again", func(ctx context.Context) (bool, error) {
		getErr := c.client.Get(ctx, idKey, id)
		return getErr == nil && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), getErr
	})
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("authenticate again:\n%s", errOut)
	t.Logf("pin now %q; Identity spec.namespace %q", a77Pin(t, c, p), ptr.Deref(id.Spec.Namespace, ""))

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--timeout", "30s")
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	stillReads := a76ReadsCopyIn(t, kc, n, name)
	t.Logf("the slice identity still reads its copy in %s: %v", n, stillReads)
	if stillReads {
		assert.Error(t, err, "delete resourceslice succeeded while the slice identity still reads its copy in %s", n)
		assert.NotContains(t, errOut, "Access of the slice's identity revoked: verified", "verified while the copy in %s keeps its grant", n)
	}
}
