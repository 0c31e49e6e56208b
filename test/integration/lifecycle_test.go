package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

func setTenantCondition(t *testing.T, p *site, key client.ObjectKey, cond authv1beta1.TenantCondition) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tn authv1beta1.Tenant
		if err := p.client.Get(context.Background(), key, &tn); err != nil {
			return err
		}
		tn.Spec.TenantCondition = cond
		return p.client.Update(context.Background(), &tn)
	}))
}

func waitAccess(t *testing.T, p *site, key client.ObjectKey, granted bool, reason string) {
	t.Helper()
	eventually(t, 15*time.Second, "AccessGranted="+reason, func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		err := p.client.Get(ctx, key, &tn)
		c := meta.FindStatusCondition(tn.Status.Conditions, authv1beta1.ConditionAccessGranted)
		return c != nil && (c.Status == "True") == granted && c.Reason == reason && tn.Status.ObservedGeneration == tn.Generation, err
	})
}

// TestTenantStatesAndDeletion walks a Tenant through Cordoned, Drained and back to
// Active, checking with real requests what the consumer may do, then deletes it and
// checks that nothing it caused is left.
func TestTenantStatesAndDeletion(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "life-provider", "life-consumer")
	sites := installSites(t, cps, "cl-provider", "cl-consumer")
	p, c := sites[0], sites[1]
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	ctx := context.Background()
	kubeconfig := objectHandshake(t, p, c)
	user := newClient(t, restConfigFromKubeconfig(t, kubeconfig))
	pTN := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: pTN, Name: c.id}
	canList := func() error { return user.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(pTN)) }
	require.NoError(t, canList())

	setTenantCondition(t, p, key, authv1beta1.TenantConditionCordoned)
	waitAccess(t, p, key, true, "AccessGranted")
	require.NoError(t, canList(), "a Cordoned tenant keeps what it has")

	setTenantCondition(t, p, key, authv1beta1.TenantConditionDrained)
	waitAccess(t, p, key, false, "AccessRevoked")
	eventually(t, 10*time.Second, "a Drained tenant is refused", func(context.Context) (bool, error) {
		return apierrors.IsForbidden(canList()), nil
	})
	assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(pTN)))
	var tn authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, key, &tn))
	assert.False(t, meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady))

	// Cordoned after Drained grants nothing back.
	setTenantCondition(t, p, key, authv1beta1.TenantConditionCordoned)
	waitAccess(t, p, key, false, "CordonedNotGranted")
	assert.True(t, apierrors.IsForbidden(canList()))

	setTenantCondition(t, p, key, authv1beta1.TenantConditionActive)
	waitAccess(t, p, key, true, "AccessGranted")
	eventually(t, 10*time.Second, "Active restores access", func(context.Context) (bool, error) { return canList() == nil, nil })

	// Deletion: the finalizer removes the bindings, role and CSRs of the Tenant; its nonce
	// stays, consumed (unauthenticate deletes it).
	require.NoError(t, p.client.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(pTN, c.id)}))
	eventually(t, 15*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, key, &tn)), nil
	})
	assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(pTN)))
	var roles rbacv1.RoleList
	require.NoError(t, p.client.List(ctx, &roles, client.InNamespace(pTN)))
	assert.Empty(t, roles.Items)
	var secrets corev1.SecretList
	require.NoError(t, p.client.List(ctx, &secrets, client.InNamespace(pTN)))
	for _, s := range secrets.Items {
		assert.Equal(t, wire.NonceSecretName, s.Name, "only the consumed nonce is left")
		requireNonceConsumed(t, p.client, c.id, &s)
	}
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(ctx, &csrs))
	assert.Empty(t, csrs.Items)
	eventually(t, 10*time.Second, "the deleted tenant is refused", func(context.Context) (bool, error) {
		return apierrors.IsForbidden(canList()), nil
	})
}

// TestTenantNamespaceDeletedByHand: deleting a tenant namespace with its Tenant inside
// must not hang on the finalizer, and must leave no CSR behind (they are cluster-scoped).
func TestTenantNamespaceDeletedByHand(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "nsdel-provider", "nsdel-consumer")
	sites := installSites(t, cps, "cl-provider", "cl-consumer")
	p, c := sites[0], sites[1]
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Consumer)
	ctx := context.Background()
	objectHandshake(t, p, c)
	pTN := wire.TenantNamespaceName(c.id)
	require.NoError(t, p.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metaOf("", pTN)}))
	eventually(t, 60*time.Second, "the namespace terminates", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKey{Name: pTN}, &corev1.Namespace{})), nil
	})
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(ctx, &csrs))
	assert.Empty(t, csrs.Items)
	// The consumer authenticates again from scratch.
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	assert.Contains(t, errOut, "Nonce secret ensured")
	assert.Contains(t, errOut, "Identity status is filled")
}
