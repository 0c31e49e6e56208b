package integration

// Attack 55, helper-13's review of d4b4c84 ("In-process controllers ready without a stall,
// and one round trip and three requests fewer per handshake"): the Tenant and the Identity read beside the
// checks of their recorded tenant namespace (cluster.EnsureTenantNamespaceReading), the
// provider's record read once as its tenant namespace is ensured, and watches that drop
// the informer's initial list (wiring.AfterStart).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack55ForgedTenantInRecreatedNamespace: a namespace creator deletes the
// provider's tenant namespace of an authenticated consumer (a Tenant writer strips the
// Tenant's finalizer so that it goes), makes it again with the tenant labels, and a Tenant
// and status writer puts there an exact copy of the accepted Tenant. The Tenant is now read
// beside the checks of the recorded namespace: what it read there must not count, since
// the namespace is not the recorded one (another UID). liqoctl authenticate (no
// --adopt-tenant-namespace) must refuse the namespace, never report the copy as "already
// accepted", and leave the consumer's Identity as it was.
func TestAttack55ForgedTenantInRecreatedNamespace(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)

	pTN := wire.TenantNamespaceName(consumer.id)
	var honest authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &honest))
	rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, pTN, rec.Namespace)
	var idBefore authv1beta1.Identity
	cTN := wire.TenantNamespaceName(provider.id)
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(provider.id)}, &idBefore))

	grp := authv1beta1.GroupVersion.Group
	nsCreator := principal(t, provider, "ns-creator", "", rule("", "namespaces", "get", "list", "create", "delete"))
	tenantWriter := principal(t, provider, "tenant-writer", "",
		rule(grp, "tenants", "get", "list", "create", "update", "patch"), rule(grp, "tenants/status", "get", "update", "patch"))

	// The namespace goes: its Tenant's finalizer stripped (no controller runs to take it).
	require.NoError(t, nsCreator.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pTN}}))
	eventually(t, 90*time.Second, "the tenant namespace is gone", func(ctx context.Context) (bool, error) {
		var ts authv1beta1.TenantList
		if listErr := tenantWriter.List(ctx, &ts, client.InNamespace(pTN)); listErr != nil {
			return false, listErr
		}
		for i := range ts.Items {
			if len(ts.Items[i].Finalizers) > 0 {
				p := client.MergeFrom(ts.Items[i].DeepCopy())
				ts.Items[i].Finalizers = nil
				if patchErr := tenantWriter.Patch(ctx, &ts.Items[i], p); patchErr != nil && !apierrors.IsNotFound(patchErr) {
					return false, patchErr
				}
			}
		}
		getErr := nsCreator.Get(ctx, client.ObjectKey{Name: pTN}, &corev1.Namespace{})
		return apierrors.IsNotFound(getErr), client.IgnoreNotFound(getErr)
	})

	// Made again, as a tenant namespace would look, with a copy of the accepted Tenant.
	look := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pTN, Labels: cluster.TenantNamespaceLabels(consumer.id)}}
	require.NoError(t, nsCreator.Create(ctx, look))
	require.NotEqual(t, rec.NamespaceUID, look.UID)
	forged := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: consumer.id, Labels: honest.Labels}, Spec: honest.Spec}
	require.NoError(t, tenantWriter.Create(ctx, forged))
	forged.Status = honest.Status
	require.NoError(t, tenantWriter.Status().Update(ctx, forged))

	// Several runs: the read and the check of the namespace race each time.
	for i := range 3 {
		_, errOut, runErr := runCLI(t, pairArgs("authenticate", consumer, provider)...)
		require.Error(t, runErr, "run %d: authenticate went on in a namespace that is not the recorded one\nstderr:\n%s", i, errOut)
		assert.ErrorIs(t, runErr, cluster.ErrUnrecordedNamespace, "run %d", i)
		assert.NotContains(t, errOut, "Tenant already accepted", "run %d: the Tenant of a namespace that is not the recorded one counted", i)
		assert.NotContains(t, errOut, "nothing to do", "run %d", i)
	}
	var idAfter authv1beta1.Identity
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(provider.id)}, &idAfter))
	assert.Equal(t, idBefore.ResourceVersion, idAfter.ResourceVersion, "the consumer's Identity was rewritten")
	var still corev1.Namespace
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Name: pTN}, &still))
	assert.Equal(t, look.UID, still.UID)
	rec2, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	assert.Equal(t, rec.NamespaceUID, rec2.NamespaceUID, "the look-alike was recorded as the tenant namespace")
}

// TestAttack55DependenciesPresentAtStart: the tenant controller's watches of nonce
// Secrets, of liqo-auth-config and of the keys Secret drop their initial list
// (wiring.AfterStart). A Tenant and its nonce Secret written while no controller ran (a
// manager restart, or liqoctl before it starts the in-process controllers) must still be
// decided once the controllers start: the Tenants' own source enqueues it.
func TestAttack55DependenciesPresentAtStart(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "provider")
	p := installSites(t, cps, "cl-provider-d4")[0]
	a := newAttacker(t, "cl-late-d4")
	tn, nonce := freshNonce(t, p, a.id)
	tenant := a.honestTenant(t, tn, nonce)
	require.NoError(t, p.client.Create(context.Background(), tenant))
	// Nothing decided it yet.
	time.Sleep(200 * time.Millisecond)
	startControllers(t, p, authmanager.Provider)
	waitTenantCondition(t, p, client.ObjectKeyFromObject(tenant), authv1beta1.ConditionReady, metav1.ConditionTrue, "Ready")
}
