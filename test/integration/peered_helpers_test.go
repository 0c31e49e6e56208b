package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// peered is a consumer that completed liqoctl authenticate with a provider whose
// liqo-auth-manager runs (as a provider only): what the attacks on an accepted Tenant start
// from.
type peered struct {
	consumer, provider *site
	// tn is the consumer's tenant namespace on the provider; key its Tenant.
	tn  string
	key client.ObjectKey
}

// peerWithManager starts the provider's manager with managerArgs and authenticates.
func peerWithManager(t *testing.T, managerArgs ...string) *peered {
	t.Helper()
	consumer, provider := cliSites(t)
	startManager(t, provider, append([]string{"--consumer=false"}, managerArgs...)...)
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	tn := wire.TenantNamespaceName(consumer.id)
	return &peered{consumer: consumer, provider: provider, tn: tn, key: client.ObjectKey{Namespace: tn, Name: consumer.id}}
}

// issued counts the certificates the provider's tenant record lists for the consumer.
func (p *peered) issued(t *testing.T) int {
	t.Helper()
	rec, err := cluster.GetTenantRecord(context.Background(), p.provider.client, wire.DefaultLiqoNamespace, p.consumer.id)
	require.NoError(t, err)
	return len(rec.Certificates)
}

// statusWriter is a principal that may read the Tenants of the tenant namespace and write
// their status, nothing else.
func (p *peered) statusWriter(t *testing.T) client.Client {
	t.Helper()
	return principal(t, p.provider, "tenant-status-writer", p.tn,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
}

// presenceLease waits for the consumer's presence Lease (the manager must run with
// --peer-gone-after) and returns its key and the Lease.
func (p *peered) presenceLease(t *testing.T) (client.ObjectKey, coordinationv1.Lease) {
	t.Helper()
	key := client.ObjectKey{Namespace: p.tn, Name: wire.PresenceLeaseName}
	var lease coordinationv1.Lease
	eventuallyNoError(t, context.Background(), "the presence Lease created", func(ctx context.Context) error {
		return p.provider.client.Get(ctx, key, &lease)
	})
	return key, lease
}
