package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// TestAttack60bTenantWriterProxyOutlivesTheConsumersReapply acts as a Tenant writer of
// the provider's tenant namespace (tenants get, update). The consumer peered with no proxy
// (the default). The writer puts its proxy in the accepted Tenant's spec.proxyURL and
// breaks the acceptance (another CSR: the seal no longer verifies over the spec). The
// consumer's administrator re-runs liqoctl authenticate, asking for no proxy, to mend the
// peering: the run exchanges a nonce and applies its Tenant again, whose server-side apply
// leaves the writer's proxy in place, and the provider copies it into the status; the
// consumer's new Identity still reaches the provider directly, as the run asked and this
// cluster pinned. Found by helper-25 on 2739ba1, where the Identity took the writer's proxy.
func TestAttack60bTenantWriterProxyOutlivesTheConsumersReapply(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	other := newAttacker(t, c.id)
	writer := principal(t, p, "tenant-writer", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "update"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tn authv1beta1.Tenant
		if err := writer.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn); err != nil {
			return err
		}
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
		tn.Spec.CSR = other.csr(t)
		return writer.Update(ctx, &tn)
	}))
	// The provider's controllers take the acceptance back (read by the test, not the writer).
	eventually(t, 30*time.Second, "the acceptance taken back", func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		if err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn); err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionAuthenticated), nil
	})
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	t.Logf("re-run: %v\n%s", err, errOut)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Empty(t, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the consumer's Identity took the Tenant writer's proxy\nstderr:\n%s", errOut)
	assert.NotContains(t, string(kubeconfigOf(t, c, p)), "attacker")
}
