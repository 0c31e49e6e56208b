package integration

// Attack 78 (helper-44's F1, helper-45's F1 and F4): on a peering older than the tenant
// namespace pin, liqoctl generate tenant run with another --remote-tenant-namespace than
// the one its accepted control-plane Identity names would pin it, and send the slices'
// copies and their removal where they are not. It is refused, before anything is pinned,
// and its advice names no command built from the Identity's namespace (an Identity
// writer's field).

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack78GenerateTenantKeepsALegacyPeeringsNamespace: the consumer peered with
// authenticate; its record's namespace pin is removed (a record from before the pin). Its
// administrator runs generate tenant with another --remote-tenant-namespace. What must
// hold: refused, naming the flag's namespace and not the Identity's as a command, and the
// record unchanged (no CA, proxy or namespace pinned by a refused run).
func TestAttack78GenerateTenantKeepsALegacyPeeringsNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	a77Unpin(t, c, p)
	recordKey := client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}
	var before corev1.ConfigMap
	require.NoError(t, c.client.Get(context.Background(), recordKey, &before))
	// A CA pin removed too, so that a run which pinned before its refusal would show.
	delete(before.Data, "caFingerprint")
	require.NoError(t, c.client.Update(context.Background(), &before))

	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	nonce, _ := mustCLI(t, "get", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	_, errOut, err := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce),
		"--remote-tenant-namespace", "a78-elsewhere", "--expect-fingerprint", "sha256:"+strings.Repeat("ab", 32))
	t.Logf("generate tenant: err=%v\n%s", err, errOut)
	require.Error(t, err, "generate tenant pinned another tenant namespace than the one the accepted Identity names")
	assert.Contains(t, err.Error(), `names another tenant namespace there than "a78-elsewhere"`)
	assert.NotContains(t, err.Error(), "--remote-tenant-namespace "+wire.TenantNamespaceName(c.id), "advice built from the Identity's namespace, an Identity writer's field")

	var after corev1.ConfigMap
	require.NoError(t, c.client.Get(context.Background(), recordKey, &after))
	assert.Equal(t, before.Data, after.Data, "a refused run changed the record")
}
