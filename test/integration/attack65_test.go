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
// same peering-user kubeconfig. 9d5b54c makes IdentityCredential refuse the Identity's
// proxy while none is pinned, "advising" a re-run of authenticate with --tenant-proxy-url;
// unauthenticate only warns and goes on removing the Identity, so the peering user (which
// may not ask SubjectAccessReviews) cannot prove the revocation, and the advice can no
// longer be followed without peering again. What must hold: either the revocation is
// verified (through X, as on e7e5d61), or the command refuses before it removes anything,
// so that the pin advice can still be followed. Found by helper-31 on 1891414, where the
// Identity was removed and the revocation could not be verified.
func TestAttack65UnauthenticateOfAProxiedPeeringBeforeThePin(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu, x, tunnels := authenticateThroughProxyAsPeeringUser(t, c, p)
	h29Unpin(t, c, p)

	before := tunnels.Load()
	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	t.Logf("unauthenticate: err=%v tunnels through X: %d\n%s", err, tunnels.Load()-before, errOut)
	if err == nil {
		assert.Contains(t, errOut, "Access revoked: verified")
		return
	}
	getErr := c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
	require.False(t, apierrors.IsNotFound(getErr),
		"unauthenticate removed the Identity and then could not verify the revocation (its warning's advice, re-running authenticate with --tenant-proxy-url, now peers again): %v\nstderr:\n%s", err, errOut)
	assert.ErrorContains(t, err, "Nothing was removed")

	// The refusal's advice, followed: the re-run pins X, and unauthenticate then proves the
	// revocation through it.
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu, "--tenant-proxy-url", x)
	_, errOut = mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	assert.Contains(t, errOut, "Access revoked: verified")
}
