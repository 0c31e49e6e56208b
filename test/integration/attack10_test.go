package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack10StatusWriterMakesRenewTenantSayDrained acts as a status writer
// (tenants/status) of a provider's tenant namespace where no manager runs. It writes
// status.tenantCondition Drained. The administrator never drained the tenant (the tenant
// record, which only the administrator and the manager write, says so). liqoctl renew
// tenant read the state in force from the status, before it started the controllers that
// would put it back, and refused: "Tenant ... is Drained ... (liqoctl uncordon tenant
// first)", a decision nobody took, told to the administrator with an instruction to undo
// it. renew.go reads the serial from the record for exactly this reason ("never from the
// Tenant's status"), but the Drained check still reads the status.
func TestAttack10StatusWriterMakesRenewTenantSayDrained(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}

	rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	require.NotEqual(t, string(authv1beta1.TenantConditionDrained), rec.State, "the administrator did not drain the tenant")

	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, key, &tn))
	tn.Status.TenantCondition = authv1beta1.TenantConditionDrained
	require.NoError(t, writer.Status().Update(ctx, &tn))

	_, errOut, err := runCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig, "--timeout", "30s")
	t.Logf("liqoctl renew tenant: err %v\n%s", err, errOut)
	require.NoError(t, err, "liqoctl renew tenant refused a tenant the record says is %q: a status writer chose the refusal", rec.State)
	assert.False(t, strings.Contains(errOut, "uncordon"), "told the administrator to uncordon a tenant nobody drained")
	assert.Contains(t, errOut, "issued")
}

// TestAttack10StatusWriterFightsRenewTenantWithinItsTimeout acts as a status writer who
// keeps writing another serial into status.certificate while liqoctl renew tenant waits:
// the command either reports the renewal the record shows or ends by its --timeout, never
// later, and never reports a serial the record does not publish.
func TestAttack10StatusWriterFightsRenewTenantWithinItsTimeout(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for fctx.Err() == nil {
			var tn authv1beta1.Tenant
			if writer.Get(fctx, key, &tn) == nil && tn.Status.Certificate != nil {
				tn.Status.Certificate.SerialNumber = "feedface"
				_ = writer.Status().Update(fctx, &tn)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	out, errOut, err := runCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig, "--timeout", "15s")
	took := time.Since(start)
	stop()
	<-done
	t.Logf("liqoctl renew tenant after %s: err %v\n%s%s", took, err, out, errOut)
	assert.Less(t, took, 25*time.Second, "renew tenant outlived its --timeout")
	if err == nil {
		rec, getErr := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
		require.NoError(t, getErr)
		cert, _, _ := rec.PublishedIn(mustTenantUID(t, provider, key))
		require.NotNil(t, cert)
		assert.Contains(t, out+errOut, "Certificate "+cert.SerialNumber.Text(16)+" issued")
		assert.NotContains(t, out+errOut, "feedface")
	}
}

func mustTenantUID(t *testing.T, s *site, key client.ObjectKey) string {
	t.Helper()
	var tn authv1beta1.Tenant
	require.NoError(t, s.client.Get(context.Background(), key, &tn))
	return string(tn.UID)
}
