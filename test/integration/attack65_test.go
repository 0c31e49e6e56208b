package integration

// Attack 65 (helper-31): the re-pin of an unpinned proxy (9d5b54c): Pair.complete /
// proxyUnpinned, identityWritten's stale ProxyNotPinned, IdentityCredential's refusal.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// a65RecordVersion is the resourceVersion of c's tenant record of p.
func a65RecordVersion(t *testing.T, c, p *site) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}, cm))
	return cm.ResourceVersion
}

// TestAttack65DryRunOfTheAdvisedRepinSaysNothingWouldChange: no attacker, a real user. A consumer with no manager peered through proxy X
// before the proxy pin (its record has no proxy key). verify refuses and advises liqoctl
// authenticate --tenant-proxy-url X again; the administrator first asks for the plan with
// --dry-run. What must hold: the dry run does not say "nothing would change" when the run
// it stands for writes the pin. Once pinned, both runs say already authenticated and
// write nothing. Found by helper-31 on 1891414, where Pair.proxyUnpinned read only the
// record noted while ensuring the tenant namespace, which Inspect (the dry run's read)
// never does.
func TestAttack65DryRunOfTheAdvisedRepinSaysNothingWouldChange(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	x, _ := legacyProxiedPeering(t, c, p)

	rv := a65RecordVersion(t, c, p)
	_, dryErr := mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x, "--dry-run")...)
	t.Logf("dry run:\n%s", dryErr)
	require.Equal(t, rv, a65RecordVersion(t, c, p), "the dry run wrote the record")
	_, runErr := mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x)...)
	t.Logf("run:\n%s", runErr)
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	require.Equal(t, x, ptr.Deref(rec.ProxyURL, "<nil>"), "the run did not pin X")
	if strings.Contains(dryErr, "nothing would change") {
		t.Errorf("the dry run said nothing would change, and the run it stands for pinned proxy %q in the tenant record:\ndry run:\n%s\nrun:\n%s", x, dryErr, runErr)
	}

	// Regression: pinned now, a run and its dry run change nothing.
	rv = a65RecordVersion(t, c, p)
	_, dryErr = mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x, "--dry-run")...)
	assert.Contains(t, dryErr, "nothing would change")
	_, runErr = mustCLI(t, pairArgs("authenticate", c, p, "--tenant-proxy-url", x)...)
	assert.Contains(t, runErr, "nothing to do")
	assert.Equal(t, rv, a65RecordVersion(t, c, p), "a run on a pinned, complete pair wrote the record")
}

// TestAttack65UnauthenticateOfAProxiedPeeringBeforeThePin: no attacker, a real user, on
// the path most users take (a peering user's kubeconfig for the provider). The consumer
// peered through proxy X (authenticate --tenant-proxy-url X) before the proxy pin (its
// record has no proxy key). The administrator then runs liqoctl unauthenticate with the
// same peering user, which may not ask SubjectAccessReviews: the consumer's own
// certificate proves the revocation. What must hold: the access is given up and the
// revocation proven, the way this cluster's controllers reach the provider while no proxy
// is pinned (none: X was never pinned), with a warning that says so. Found by helper-31 on
// 1891414, where IdentityCredential refused X and unauthenticate removed the Identity and
// then could not prove the revocation; the first fix (refusing before removing anything)
// let an Identity writer stop every revocation (helper-32,
// TestAttack66IdentityWriterBlocksTheRevocationOfALegacyPeering).
func TestAttack65UnauthenticateOfAProxiedPeeringBeforeThePin(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	pu, _, tunnels := authenticateThroughProxyAsPeeringUser(t, c, p)
	h29Unpin(t, c, p)

	before := tunnels.Load()
	_, errOut := mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	assert.Contains(t, errOut, "this cluster pinned no proxy for provider")
	assert.Contains(t, errOut, "its certificate reaches the provider directly")
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.Equal(t, before, tunnels.Load(), "the revocation was proven through a proxy no handshake pinned")
	err := p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "the consumer's Tenant is still on the provider: %v", err)
}
