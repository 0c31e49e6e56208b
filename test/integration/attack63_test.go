package integration

// Attack 63: the consumer's own proofs (liqoctl verify, unauthenticate) through an
// Identity writer's proxy.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cmd/verify"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack63IdentityWriterProxiesTheConsumersProofs acts as an Identity writer of the
// consumer's tenant namespace (identities get, update) on a peering that pinned no proxy,
// made with a peering user the provider handed out. It points the control-plane Identity
// at its own forwarding proxy. The consumer's administrator then runs liqoctl verify, and
// liqoctl unauthenticate with the peering user, whose credentials may not ask the
// provider's SubjectAccessReviews: both ask the provider what the consumer's own
// certificate may do, with a client made from the Identity
// (handshake.IdentityCredential). What must hold: both reach the provider the way this
// cluster pinned (directly), the revocation is proven, and nothing tunnels through the
// writer's proxy. Fails on e7e5d61, where IdentityCredential took the Identity's proxy.
func TestAttack63IdentityWriterProxiesTheConsumersProofs(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	cTN := wire.TenantNamespaceName(p.id)
	proxy, tunnels := connectProxy(t)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	rewrite(t, writer, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, false, func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = ptr.To(proxy)
	})

	out, errOut, _ := runCLI(t, "verify", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "-o", "json")
	var r verify.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r), "verify -o json printed:\n%s\nstderr:\n%s", out, errOut)
	checked := false
	for _, peer := range r.Peers {
		for _, check := range peer.Checks {
			if check.Name == "authentication" {
				checked = true
				assert.Equal(t, verify.ResultPass, check.Result, "verify's authentication check: %s", check.Detail)
			}
		}
	}
	assert.True(t, checked, "verify made no authentication check:\n%s", out)
	assert.Zero(t, tunnels.Load(), "verify proved the consumer's identity through the Identity writer's proxy")

	before := tunnels.Load()
	_, errOut = mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	assert.Contains(t, errOut, "the consumer's own certificate asks instead")
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.Equal(t, before, tunnels.Load(), "unauthenticate proved the revocation through the Identity writer's proxy\nstderr:\n%s", errOut)
}
