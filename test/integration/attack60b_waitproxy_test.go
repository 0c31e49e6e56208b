package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack60bTenantWriterSwapsTheProxyWhileAuthenticateWaits acts as a Tenant writer of
// the provider's tenant namespace (tenants get, update: spec.proxyURL is not covered by the
// acceptance seal). The consumer runs liqoctl authenticate --tenant-proxy-url with its own
// proxy on a provider that requires approval; while the run waits for the provider's
// administrator, the writer rewrites the Tenant's spec.proxyURL to a host of its choosing.
// The administrator approves; the provider copies the spec's proxy into the status, and the
// consumer's Identity still carries the proxy the run asked for (ForgeIdentity is given
// the run's, never the Tenant's). Found by helper-25 on 2739ba1, where it took the writer's.
func TestAttack60bTenantWriterSwapsTheProxyWhileAuthenticateWaits(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	const asked = "socks5://proxy.consumer.example:1080"
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	key := client.ObjectKey{Namespace: pTN, Name: c.id}

	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type result struct {
		errOut string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, err := runCLIContext(actx, pairArgs("authenticate", c, p, "--tenant-proxy-url", asked)...)
		done <- result{errOut, err}
	}()
	// The Tenant is on the provider and waits for approval (read by the test, not the writer).
	eventually(t, time.Minute, "the Tenant waits for approval", func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		if err := p.client.Get(ctx, key, &tn); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return awaitsApprovalForTest(&tn), nil
	})

	writer := principal(t, p, "tenant-writer", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "update"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tn authv1beta1.Tenant
		if err := writer.Get(ctx, key, &tn); err != nil {
			return err
		}
		tn.Spec.ProxyURL = ptr.To(attackerProxy)
		return writer.Update(ctx, &tn)
	}))

	// The provider's administrator approves the key, as they were asked to.
	mustCLI(t, "approve", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	r := <-done
	var id authv1beta1.Identity
	err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id)
	if r.err == nil {
		require.NoError(t, err)
		assert.Equal(t, asked, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""),
			"authenticate --tenant-proxy-url %s made an Identity through the Tenant writer's proxy\nstderr:\n%s", asked, r.errOut)
		assert.NotContains(t, string(kubeconfigOf(t, c, p)), "attacker", "the kubeconfig reaches the provider through the Tenant writer's proxy")
		return
	}
	// A refusal is fine too, as long as nothing carries the writer's proxy.
	if err == nil {
		assert.NotEqual(t, attackerProxy, ptr.Deref(id.Spec.AuthParams.ProxyURL, ""), "the Identity carries the Tenant writer's proxy")
	}
}

// awaitsApprovalForTest: the Tenant's Approved condition is False (ApprovalPending).
func awaitsApprovalForTest(tn *authv1beta1.Tenant) bool {
	for _, c := range tn.Status.Conditions {
		if c.Type == authv1beta1.ConditionApproved && c.Reason == authv1beta1.ReasonApprovalPending {
			return true
		}
	}
	return false
}
