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
	corev1 "k8s.io/api/core/v1"
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
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("a80", "a80-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 60*time.Second)
	pTN := wire.TenantNamespaceName(c.id)
	require.Equal(t, pTN, a77Pin(t, c, p), "setup: a Peering's handshake pins the namespace it used")
	a77Unpin(t, c, p)
	// A record as a release before the pins wrote it has no pinnedOnce either.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm); err != nil {
			return err
		}
		delete(cm.Data, "pinnedOnce")
		delete(cm.Data, "proxyURL")
		return c.client.Update(ctx, &cm)
	}))

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
