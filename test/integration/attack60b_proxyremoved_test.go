package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestAttack60bTenantWriterRemovesTheProxySilently acts as a Tenant writer of the
// provider's tenant namespace (tenants get, update). The consumer asked to reach the
// provider through its proxy; the writer removes spec.proxyURL from the accepted Tenant.
// liqoctl generate identity warns the provider's administrator with the proxy it hands
// over, none included (on 8df8937 it warned only when there was one: helper-25), and the
// consumer's identity controller refuses the Identity, which does not reach the provider
// through the proxy the consumer pinned (ProxyNotPinned).
func TestAttack60bTenantWriterRemovesTheProxySilently(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const asked = "socks5://proxy.consumer.example:1080"
	mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
	pTN := wire.TenantNamespaceName(c.id)
	writer := principal(t, p, "tenant-writer", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "update"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tn authv1beta1.Tenant
		if err := writer.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &tn); err != nil {
			return err
		}
		tn.Spec.ProxyURL = nil
		return writer.Update(ctx, &tn)
	}))
	out, errOut := mustCLI(t, "generate", "identity", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", c.id)
	require.NotContains(t, out, asked, "the Identity kept the proxy (nothing to show)")
	assert.True(t, strings.Contains(errOut, "WARN") && strings.Contains(errOut, "names no proxy"),
		"generate identity handed over an Identity without the consumer's proxy and warned of nothing\nstderr:\n%s", errOut)

	// The consumer's administrator applies what was handed over; its controllers refuse it.
	var handed authv1beta1.Identity
	require.NoError(t, yaml.Unmarshal([]byte(out), &handed))
	startControllers(t, c, authmanager.Consumer)
	var id authv1beta1.Identity
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(&handed), &id); err != nil {
			return err
		}
		id.Spec = handed.Spec
		return c.client.Update(ctx, &id)
	}))
	expectIdentityRefused(t, c, &id, string(authn.ReasonProxyNotPinned))
	assert.Contains(t, string(kubeconfigOf(t, c, p)), "proxy-url: "+asked, "the kubeconfig still reaches the provider through the consumer's proxy")
}
