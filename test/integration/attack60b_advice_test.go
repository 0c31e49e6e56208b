package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack60bTenantWriterDictatesTheProxyAdvice acts as a Tenant writer of the provider's
// tenant namespace (tenants get, update). The consumer peered through its own proxy; the
// writer rewrites the accepted Tenant's spec.proxyURL (not covered by the acceptance seal)
// to a host of its choosing. The consumer's re-run with the proxy it asked for is never
// told to take the writer's (on 2739ba1 the refusal advised "--tenant-proxy-url=" with the
// Tenant's proxy: helper-25), and its Identity keeps the consumer's proxy: the reference
// is the proxy this cluster pinned in its own tenant record, not the provider's Tenant.
func TestAttack60bTenantWriterDictatesTheProxyAdvice(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const asked = "socks5://proxy.consumer.example:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	writer := principal(t, p, "tenant-writer", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "update"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tn authv1beta1.Tenant
		if err := writer.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn); err != nil {
			return err
		}
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
		return writer.Update(ctx, &tn)
	}))

	for _, dry := range []bool{true, false} {
		args := pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)
		if dry {
			args = append(args, "--dry-run")
		}
		_, errOut, err := runCLI(t, args...)
		if err == nil {
			continue
		}
		assert.NotContains(t, err.Error(), `--tenant-proxy-url="`+attackerProxy,
			"the consumer's re-run with its own proxy is told to take the Tenant writer's (dry run %v)\nstderr:\n%s", dry, errOut)
	}
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Equal(t, asked, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""))
}
