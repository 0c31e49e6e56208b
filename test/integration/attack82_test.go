package integration

// Attack 82 (helper-48 on ba3533a, with 3f9c7b7 for context). The consumer's manager pins,
// once (pinnedOnce), liqo-tenant-<consumer> and no proxy in the record of a peering a
// Peering made before the pins (pinLegacy), whenever the record lists a bootstrap
// credential that Peering used and an Identity of the provider is there. Neither says
// which handshake made the Identity that is there now.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack82LegacyPinTakesAHandMadePeeringForThePeerings. The consumer peered through a
// Peering (liqo-tenant-<consumer> on the provider), its administrator ran liqoctl
// unauthenticate (the Peering stays, its record still names it), the provider's
// administrator moved the consumer's tenant namespace to N (adopted), and the consumer's
// administrator peered again by hand, liqoctl authenticate with both kubeconfigs, and asked
// a slice, whose copy is in N. The record is as a release before the pins wrote it (no
// pins, no pinnedOnce). The consumer's manager takes the hand-made Identity for the
// Peering's and pins liqo-tenant-<consumer>, where this peering is not. An Identity writer
// of the consumer's tenant namespace (identities get, list, update; nothing else) then
// moves every Identity of the provider there, which the pin accepts. What must hold:
// liqoctl delete resourceslice never says "verified" while the slice identity still reads
// its copy in N.
func TestAttack82LegacyPinTakesAHandMadePeeringForThePeerings(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const n, name = "a82-consumer-space", "slice-a82"
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)

	// A peering a Peering made, ended by the administrator with liqoctl (the Peering stays).
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("a82", "a82-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 60*time.Second)
	def := wire.TenantNamespaceName(c.id)
	require.Equal(t, def, a77Pin(t, c, p), "setup: the Peering's handshake pinned its namespace")
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	require.NotEmpty(t, a81Record(t, c, p)["peering"], "setup: the record still says which Peering peered")

	// The provider's administrator keeps this consumer in N from now on.
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: cluster.TenantNamespaceLabels(c.id)}}))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var old corev1.Namespace
		if err := p.client.Get(ctx, client.ObjectKey{Name: def}, &old); err != nil {
			return err
		}
		delete(old.Labels, wire.TenantNamespaceLabel)
		delete(old.Labels, wire.RemoteClusterIDLabel)
		return p.client.Update(ctx, &old)
	}))
	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--adopt-tenant-namespace", "--kubeconfig", p.cp.Kubeconfig)

	// The consumer's administrator peers again, by hand, and asks a slice.
	mustCLI(t, pairArgs("authenticate", c, p)...)
	require.Equal(t, n, a77Pin(t, c, p), "setup: authenticate pinned %s", n)
	cTN := wire.TenantNamespaceName(p.id)
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, name, "", "1")))
	kc := sliceKubeconfig(t, c, p, name)
	require.True(t, a76ReadsCopyIn(t, kc, n, name), "setup: the slice identity reads its copy in %s", n)
	t.Cleanup(func() {
		var left authv1beta1.ResourceSlice
		if p.client.Get(context.Background(), client.ObjectKey{Namespace: n, Name: name}, &left) == nil {
			_ = p.client.Delete(context.Background(), &left)
		}
	})

	// A record as a release before the pins wrote it: no pins, no pinnedOnce.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.client.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm); err != nil {
			return err
		}
		delete(cm.Data, "providerTenantNamespace")
		delete(cm.Data, "proxyURL")
		delete(cm.Data, "pinnedOnce")
		return c.client.Update(ctx, &cm)
	}))

	// The Identity writer: every Identity of the provider now names the default.
	writer := principal(t, c, "identity-writer-a82", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "list", "update"))
	moveAll := func() {
		var ids authv1beta1.IdentityList
		require.NoError(t, writer.List(ctx, &ids, client.InNamespace(cTN)))
		for i := range ids.Items {
			key := client.ObjectKeyFromObject(&ids.Items[i])
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var id authv1beta1.Identity
				if err := writer.Get(ctx, key, &id); err != nil {
					return err
				}
				if ptr.Deref(id.Spec.Namespace, "") == def {
					return nil
				}
				id.Spec.Namespace = ptr.To(def)
				return writer.Update(ctx, &id)
			}))
		}
	}
	moveAll()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && a77Pin(t, c, p) == "" {
		time.Sleep(200 * time.Millisecond)
	}
	pinned := a77Pin(t, c, p)
	t.Logf("pin after the old record met the Peering: %q (the provider keeps this cluster in %q); Peering events: %v", pinned, n, peeringEvents(t, c.client, pe.Name))
	assert.NotEqual(t, def, pinned, "the manager pinned %s, the Peering's namespace, for a peering liqoctl authenticate made in %s", def, n)
	moveAll()
	time.Sleep(3 * time.Second) // the identity controller decides the moved Identities

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--timeout", "30s")
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	copyLeft := p.client.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, &authv1beta1.ResourceSlice{}) == nil
	stillReads := a76ReadsCopyIn(t, kc, n, name)
	t.Logf("after delete resourceslice: copy left in %s: %v; the slice identity still reads it: %v", n, copyLeft, stillReads)
	if stillReads {
		assert.Error(t, err, "delete resourceslice succeeded while the slice identity still reads its copy in %s", n)
		assert.NotContains(t, errOut, "Access of the slice's identity revoked: verified", "verified while the copy in %s keeps its grant", n)
	}
}
