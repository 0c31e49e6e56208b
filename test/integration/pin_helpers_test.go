package integration

// Helpers of the attacks on the consumer's tenant namespace pin (attacks 77 to 82).

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
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// pinAdoptedPeering has p's administrator keep c's tenant namespace in n (made and
// adopted), peers c with p with liqoctl authenticate (pin: n), starts c's consumer
// controllers and has slice name accepted, its copy in n. It returns the slice
// identity's kubeconfig; the copy is removed at the end if left.
func pinAdoptedPeering(t *testing.T, c, p *site, n, name string) []byte {
	t.Helper()
	ctx := context.Background()
	startManager(t, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: cluster.TenantNamespaceLabels(c.id)}}))
	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--adopt-tenant-namespace", "--kubeconfig", p.cp.Kubeconfig)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)
	require.Equal(t, n, a77Pin(t, c, p), "setup: authenticate pinned %s", n)
	return pinSliceIn(t, c, p, n, name)
}

// pinSliceIn has c's slice name accepted by p, its copy in n, and returns the slice
// identity's kubeconfig; the copy is removed at the end if left.
func pinSliceIn(t *testing.T, c, p *site, n, name string) []byte {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, name, "", "1")))
	kc := sliceKubeconfig(t, c, p, name)
	require.True(t, a76ReadsCopyIn(t, kc, n, name), "setup: the slice identity reads its copy in %s", n)
	t.Cleanup(func() {
		var left authv1beta1.ResourceSlice
		if p.client.Get(context.Background(), client.ObjectKey{Namespace: n, Name: name}, &left) == nil {
			_ = p.client.Delete(context.Background(), &left)
		}
	})
	return kc
}

// pinLegacyRecord makes c's record of p one a release before the pins wrote: no tenant
// namespace, proxy or pinnedOnce (as c's administrator).
func pinLegacyRecord(t *testing.T, c, p *site) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, &cm); err != nil {
			return err
		}
		for _, key := range []string{"providerTenantNamespace", "proxyURL", "pinnedOnce", "pinnedByManager"} {
			delete(cm.Data, key)
		}
		return c.client.Update(context.Background(), &cm)
	}))
}

// pinMoveAllIdentities returns what an Identity writer of c's tenant namespace of p
// (identities get, list, update; user) does: every Identity there names to as the
// provider's namespace.
func pinMoveAllIdentities(t *testing.T, c, p *site, user, to string) func() {
	t.Helper()
	ctx := context.Background()
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, user, cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "list", "update"))
	return func() {
		var ids authv1beta1.IdentityList
		require.NoError(t, writer.List(ctx, &ids, client.InNamespace(cTN)))
		for i := range ids.Items {
			key := client.ObjectKeyFromObject(&ids.Items[i])
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var id authv1beta1.Identity
				if err := writer.Get(ctx, key, &id); err != nil {
					return err
				}
				if ptr.Deref(id.Spec.Namespace, "") == to {
					return nil
				}
				id.Spec.Namespace = ptr.To(to)
				return writer.Update(ctx, &id)
			}))
		}
	}
}

// pinDeleteSliceNeverFalselyVerified runs liqoctl delete resourceslice name on c (of
// provider p): what must hold is that it neither succeeds nor says "verified" while the
// slice identity (kc) still reads its copy in n.
func pinDeleteSliceNeverFalselyVerified(t *testing.T, c, p *site, n, name string, kc []byte) {
	t.Helper()
	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--timeout", "30s")
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	copyLeft := p.client.Get(context.Background(), client.ObjectKey{Namespace: n, Name: name}, &authv1beta1.ResourceSlice{}) == nil
	stillReads := a76ReadsCopyIn(t, kc, n, name)
	t.Logf("after delete resourceslice: copy left in %s: %v; the slice identity still reads it: %v", n, copyLeft, stillReads)
	if stillReads {
		assert.Error(t, err, "delete resourceslice succeeded while the slice identity still reads its copy in %s", n)
		assert.NotContains(t, errOut, "Access of the slice's identity revoked: verified", "verified while the copy in %s keeps its grant", n)
	}
}

// pinPeeredByAPeering starts a manager on each side and has c peer with p through a
// Peering named name (a peering user of p's), which pins the protocol's tenant namespace.
func pinPeeredByAPeering(t *testing.T, c, p *site, name string) *authv1beta1.Peering {
	t.Helper()
	ctx := context.Background()
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering(name, name+"-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 60*time.Second)
	require.Equal(t, wire.TenantNamespaceName(c.id), a77Pin(t, c, p), "setup: the Peering's handshake pinned its namespace")
	return pe
}

// pinHandMadeAfterAPeering is the setting of attack 82: c peered with p through a Peering
// (name), its administrator ended that peering with liqoctl unauthenticate (the Peering
// stays, and the record still names it), p's administrator keeps c in namespace n from
// then on (adopted), and c's administrator peered again by hand (authenticate, which
// pinned n) and asked slice, whose copy is in n; c's record is then made one a release
// before the pins wrote. It returns the Peering and the slice's kubeconfig.
func pinHandMadeAfterAPeering(t *testing.T, c, p *site, name, n, slice string) (*authv1beta1.Peering, []byte) {
	t.Helper()
	ctx := context.Background()
	pe := pinPeeredByAPeering(t, c, p, name)
	def := wire.TenantNamespaceName(c.id)
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	require.NotEmpty(t, a81Record(t, c, p)["peering"], "setup: the record still says which Peering peered")

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

	mustCLI(t, pairArgs("authenticate", c, p)...)
	require.Equal(t, n, a77Pin(t, c, p), "setup: authenticate pinned %s", n)
	kc := pinSliceIn(t, c, p, n, slice)
	pinLegacyRecord(t, c, p)
	return pe, kc
}
