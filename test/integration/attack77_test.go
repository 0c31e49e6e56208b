package integration

// Attack 77 (helper-43 on 8fdccb9): the consumer's tenant namespace on the provider is
// pinned in its tenant record by the handshakes (providerTenantNamespace); the identity
// controller refuses an Identity naming another (TenantNamespaceNotPinned), and leave, a
// slice's proof and the consumer's slice controller go where the pin says. These tests act
// as an Identity writer of the consumer's tenant namespace (identities get, update) on a
// peering made with liqoctl authenticate, and as the administrator who follows what the
// commands and the refusal advise.

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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// a77IdentityWriter is an Identity writer of c's tenant namespace of p (identities get,
// update): what it may do to the control-plane Identity, mut, is applied with retries.
func a77IdentityWriter(t *testing.T, c, p *site, user string) func(mut func(*authv1beta1.Identity)) {
	t.Helper()
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, user, cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	key := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	return func(mut func(*authv1beta1.Identity)) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var id authv1beta1.Identity
			if getErr := writer.Get(context.Background(), key, &id); getErr != nil {
				return getErr
			}
			mut(&id)
			return writer.Update(context.Background(), &id)
		}))
	}
}

// a77Pin is the tenant namespace c's record of p pins ("" for none).
func a77Pin(t *testing.T, c, p *site) string {
	t.Helper()
	var cm corev1.ConfigMap
	err := c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm)
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return cm.Data["providerTenantNamespace"]
}

// a77Unpin does what the refusal advises (kubectl patch configmap ... remove
// /data/providerTenantNamespace), as c's administrator; it also makes a record as an
// older release wrote it.
func a77Unpin(t *testing.T, c, p *site) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm); err != nil {
			return err
		}
		delete(cm.Data, "providerTenantNamespace")
		return c.client.Update(context.Background(), &cm)
	}))
	require.Empty(t, a77Pin(t, c, p), "setup: the pin is removed")
}

// a77MoveThenUnpin: the Identity writer (write) moves the control-plane Identity (idKey)
// to "default" and waits until it is refused; the administrator then removes the pin (what
// an earlier refusal advised), and the writer touches the Identity, which the controller
// decides again with no pin. It returns the Identity as last read.
func a77MoveThenUnpin(t *testing.T, c, p *site, write func(func(*authv1beta1.Identity)), idKey client.ObjectKey) *authv1beta1.Identity {
	t.Helper()
	write(func(id *authv1beta1.Identity) { id.Spec.Namespace = ptr.To("default") })
	var id authv1beta1.Identity
	var ready *metav1.Condition
	eventually(t, 30*time.Second, "the moved Identity is refused", func(ctx context.Context) (bool, error) {
		if getErr := c.client.Get(ctx, idKey, &id); getErr != nil {
			return false, getErr
		}
		ready = meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == id.Generation && ready.Status != metav1.ConditionTrue, nil
	})
	t.Logf("refusal: %s: %s", ready.Reason, ready.Message)
	a77Unpin(t, c, p)
	write(func(id *authv1beta1.Identity) {
		if id.Annotations == nil {
			id.Annotations = map[string]string{}
		}
		id.Annotations["example.com/a77"] = "touch"
	})
	return &id
}

// a77AssertLeft: c left p with its own identity, p's administrator finds nothing of its
// Tenant nor its access left in its real tenant namespace.
func a77AssertLeft(t *testing.T, c, p *site, errOut string, err error) {
	t.Helper()
	pTN := wire.TenantNamespaceName(c.id)
	ctx := context.Background()
	t.Logf("unauthenticate --leave: err=%v\n%s", err, errOut)
	assert.NoError(t, err, "leave after an Identity writer moved spec.namespace")
	assert.Contains(t, errOut, "Tenant "+pTN+"/"+c.id+" deleted on provider \""+p.id+"\" with this cluster's identity")
	assert.Contains(t, errOut, "Access on provider \""+p.id+"\" revoked: verified with this cluster's own certificate")
	tErr := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(tErr), "the consumer's Tenant in %s is gone: %v", pTN, tErr)
	for _, name := range []string{wire.TenantReaderName, wire.ControlPlaneBindingName} {
		bErr := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &rbacv1.RoleBinding{})
		assert.True(t, apierrors.IsNotFound(bErr), "binding %s in %s is gone: %v", name, pTN, bErr)
	}
}

// TestAttack77LeaveAfterIdentityWriterMovedTheNamespace: the consumer peered with liqoctl
// authenticate (a manager on the provider). An Identity writer moves the control-plane
// Identity's spec.namespace to "default". The consumer's administrator then leaves with
// liqoctl unauthenticate --remote-cluster-id P --leave. What must hold: the Tenant in the
// provider's real tenant namespace is deleted with the consumer's identity and the
// revocation is proven there. Before 8fdccb9 leave asked (and would have deleted) in
// "default", and refused to leave ("does not let this cluster's identity delete its
// Tenant"): the consumer could not leave by itself.
func TestAttack77LeaveAfterIdentityWriterMovedTheNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("pin after authenticate: %q", a77Pin(t, c, p))

	a77IdentityWriter(t, c, p, "identity-writer-a77")(func(id *authv1beta1.Identity) { id.Spec.Namespace = ptr.To("default") })

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--timeout", "60s")
	a77AssertLeft(t, c, p, errOut, err)
}

// TestAttack77ReauthenticatePinsAnUnpinnedNamespace: a record without the pin (written by
// a release before 8fdccb9, or after the administrator followed the refusal's advice to
// remove it). The administrator runs liqoctl authenticate again, as the advice says ("run
// the handshake again"). What must hold: the handshake pins this cluster's tenant
// namespace on the provider (otherwise the Identity's spec.namespace, an Identity
// writer's field, stays in force for this peering: helper-39's F7).
func TestAttack77ReauthenticatePinsAnUnpinnedNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	require.Equal(t, wire.TenantNamespaceName(c.id), a77Pin(t, c, p), "setup: authenticate pinned the tenant namespace")
	a77Unpin(t, c, p)

	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("authenticate again:\n%s", errOut)
	assert.Equal(t, wire.TenantNamespaceName(c.id), a77Pin(t, c, p), "re-running the handshake pins the tenant namespace on the provider")
}

// TestAttack77FollowingTheRefusalReopensTheMove: the consumer's manager (here its
// controllers in-process) runs. An Identity writer moves spec.namespace to "default"; the
// identity controller refuses it (TenantNamespaceNotPinned) with advice: "forget the pin
// with kubectl patch ... and run the handshake again". The administrator follows it; the
// writer touches the Identity (any update has it reconciled again). What must hold after
// the administrator's liqoctl authenticate: the pin is back and the Identity names the
// provider's real tenant namespace, and a later leave deletes the real Tenant.
func TestAttack77FollowingTheRefusalReopensTheMove(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)
	cTN, pTN := wire.TenantNamespaceName(p.id), wire.TenantNamespaceName(c.id)
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	write := a77IdentityWriter(t, c, p, "identity-writer-a77c")

	id := a77MoveThenUnpin(t, c, p, write, idKey)
	accepted := false
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !accepted {
		if c.client.Get(context.Background(), idKey, id) == nil {
			accepted = meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("with the pin removed, the moved Identity (spec.namespace=%q) is Ready: %v", ptr.Deref(id.Spec.Namespace, ""), accepted)

	// ...and runs the handshake again.
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("authenticate again:\n%s", errOut)
	require.NoError(t, c.client.Get(context.Background(), idKey, id))
	assert.Equal(t, pTN, a77Pin(t, c, p), "the handshake run again pins the tenant namespace")
	assert.Equal(t, pTN, ptr.Deref(id.Spec.Namespace, ""), "the Identity names the provider's real tenant namespace after the handshake run again")

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--timeout", "60s")
	a77AssertLeft(t, c, p, errOut, err)
}
