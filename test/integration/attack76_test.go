package integration

// Attack 76 (helper-39's F7, by reading): the provider may keep a consumer's copies in a
// tenant namespace N other than the protocol's liqo-tenant-<consumer ID>
// (wire.TenantNamespaceName): its administrator adopts N (liqoctl create nonce
// --adopt-tenant-namespace on a namespace labelled as the consumer's tenant namespace) and
// the consumer's administrator hands the Tenant over for N (liqoctl generate tenant
// --remote-tenant-namespace N). The consumer's control-plane Identity then names N in
// spec.namespace, an Identity writer's field checked for nothing but being non-empty. An
// Identity writer who moves it elsewhere makes the consumer's slice controller look for a
// slice's copy there, and the proof of liqoctl delete resourceslice ask
// liqo-tenant-<consumer ID> and there, never N.

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
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// a76ReadsCopyIn says whether the holder of kubeconfig kc may read slice name's copy in
// namespace ns of the provider.
func a76ReadsCopyIn(t *testing.T, kc []byte, ns, name string) bool {
	t.Helper()
	sc := newClient(t, restConfigFromKubeconfig(t, kc))
	return sc.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &authv1beta1.ResourceSlice{}) == nil
}

// a76ManualPeering peers c with p with the manual flow (create nonce, generate tenant,
// generate identity, each applied by the other side's administrator), the provider keeping
// c's tenant namespace in n, not in liqo-tenant-<c>. Both sides' controllers run in-process
// for the whole test.
func a76ManualPeering(t *testing.T, c, p *site, n string) {
	t.Helper()
	ctx := context.Background()
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	C, P := []string{"--kubeconfig", c.cp.Kubeconfig}, []string{"--kubeconfig", p.cp.Kubeconfig}

	// The provider's administrator makes n the consumer's tenant namespace: labelled as
	// such, then adopted by create nonce.
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: cluster.TenantNamespaceLabels(c.id)}}))
	_, errOut := mustCLI(t, append([]string{"create", "nonce", "--remote-cluster-id", c.id, "--adopt-tenant-namespace"}, P...)...)
	t.Logf("create nonce:\n%s", errOut)
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, c.id)
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, n, rec.Namespace, "setup: the provider records %s as the consumer's tenant namespace", n)
	nonce, _ := mustCLI(t, append([]string{"get", "nonce", "--remote-cluster-id", c.id}, P...)...)

	// The consumer's administrator hands the Tenant over for n.
	tenantYAML, _ := mustCLI(t, append([]string{"generate", "tenant", "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce), "--remote-tenant-namespace", n}, C...)...)
	applyYAML(t, p.client, []byte(tenantYAML))
	identityYAML, errOut := mustCLI(t, append([]string{"generate", "identity", "--remote-cluster-id", c.id}, P...)...)
	t.Logf("generate identity:\n%s", errOut)
	applyYAML(t, c.client, []byte(identityYAML))

	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the control-plane Identity is ready", func(ctx context.Context) (bool, error) {
		getErr := c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id)
		return getErr == nil && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), client.IgnoreNotFound(getErr)
	})
	require.Equal(t, n, ptr.Deref(id.Spec.Namespace, ""), "setup: the control-plane Identity names the provider's tenant namespace")
}

// TestAttack76IdentityWriterHidesACustomTenantNamespaceFromTheSlicesProof: the provider
// keeps the consumer's tenant namespace in N (not liqo-tenant-<consumer>); the consumer
// holds an accepted slice, whose copy is in N. An Identity writer of the consumer's tenant
// namespace (identities get, update) moves the control-plane Identity's spec.namespace to
// "default"; the consumer's administrator then gives the slice back with liqoctl delete
// resourceslice. What must hold: either the command fails, or the slice identity can no
// longer read its copy in N; never "Access of the slice's identity revoked: verified"
// while the copy in N is still readable with the slice's kubeconfig.
func TestAttack76IdentityWriterHidesACustomTenantNamespaceFromTheSlicesProof(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const n, name = "a76-consumer-space", "slice-a76"
	a76ManualPeering(t, c, p, n)

	cTN := wire.TenantNamespaceName(p.id)
	rs := localSlice(c, p, name, "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	kc := sliceKubeconfig(t, c, p, name)
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, &authv1beta1.ResourceSlice{}), "setup: the slice's copy is in %s", n)
	require.True(t, a76ReadsCopyIn(t, kc, n, name), "setup: the slice identity reads its copy in %s", n)
	t.Cleanup(func() {
		// Best effort: the copy an attack left, with its grant.
		var left authv1beta1.ResourceSlice
		if p.client.Get(context.Background(), client.ObjectKey{Namespace: n, Name: name}, &left) == nil {
			_ = p.client.Delete(context.Background(), &left)
		}
	})

	// The Identity writer moves spec.namespace from n to "default".
	writer := principal(t, c, "identity-writer-a76", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if getErr := writer.Get(ctx, idKey, &id); getErr != nil {
			return getErr
		}
		id.Spec.Namespace = ptr.To("default")
		return writer.Update(ctx, &id)
	}))
	var moved authv1beta1.Identity
	eventually(t, 30*time.Second, "the identity controller decided on the moved Identity", func(ctx context.Context) (bool, error) {
		if getErr := c.client.Get(ctx, idKey, &moved); getErr != nil {
			return false, getErr
		}
		ready := meta.FindStatusCondition(moved.Status.Conditions, authv1beta1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == moved.Generation, nil
	})
	ready := meta.FindStatusCondition(moved.Status.Conditions, authv1beta1.ConditionReady)
	t.Logf("the moved control-plane Identity: spec.namespace=%q Ready=%s %s: %s", ptr.Deref(moved.Spec.Namespace, ""), ready.Status, ready.Reason, ready.Message)

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--timeout", "30s")
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	copyLeft := p.client.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, &authv1beta1.ResourceSlice{}) == nil
	stillReads := a76ReadsCopyIn(t, kc, n, name)
	t.Logf("after delete resourceslice: copy left in %s: %v; the slice identity still reads it with its kubeconfig: %v", n, copyLeft, stillReads)
	// The fix: the handshake pinned n in the consumer's tenant record; the identity
	// controller refuses an Identity that names another, and the consumer's controllers
	// remove the copy where the pin says.
	assert.Equal(t, string(authn.ReasonTenantNamespaceNotPinned), ready.Reason, "the moved Identity is refused")
	assert.NoError(t, err, "the slice's deletion, its copy removed where the handshake pinned it")
	assert.False(t, copyLeft, "the copy stays in %s", n)
	if stillReads {
		assert.Error(t, err, "delete resourceslice succeeded while the slice identity still reads its copy in %s", n)
		assert.NotContains(t, errOut, "Access of the slice's identity revoked: verified",
			"the revocation was 'verified' in liqo-tenant-%s and a namespace an Identity writer chose, and the copy with its grant stays in %s", c.id, n)
		if err != nil {
			assert.Contains(t, err.Error(), "-n "+n+" "+name, "the advice names the namespace the copy is in")
		}
	}
}
