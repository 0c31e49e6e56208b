package integration

// Attack 79 (helper-46 on 8fdccb9..c2dd13d): the consumer's tenant namespace on the
// provider is pinned in its tenant record (providerTenantNamespace) by the handshakes.
// liqoctl generate tenant, on a peering older than the pin, checks the namespace it pins
// against the control-plane Identity only when that Identity is accepted (Ready): an
// Identity writer who makes it not Ready for a moment disarms the check, the wrong
// namespace is pinned for good, and helper-39's F7 (a slice's proof asked where its copy
// is not, "verified" while its grant stays) is back on a pinned peering. Also: a refused
// namespace pin is found by authenticate only after the provider issued a certificate,
// and never by its dry run; a generate tenant refused for its proxy has pinned its
// namespace all the same.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// a79FreshNonce has p's administrator make a nonce for c (liqoctl create nonce, get
// nonce) and returns it.
func a79FreshNonce(t *testing.T, c, p *site) string {
	t.Helper()
	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	nonce, _ := mustCLI(t, "get", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	return strings.TrimSpace(nonce)
}

// a79WaitRefused waits until the identity controller decided the Identity at idKey, at
// its generation, as not Ready, and returns that condition.
func a79WaitRefused(t *testing.T, c *site, idKey client.ObjectKey) *metav1.Condition {
	t.Helper()
	var id authv1beta1.Identity
	var ready *metav1.Condition
	eventually(t, 30*time.Second, "the Identity is refused", func(ctx context.Context) (bool, error) {
		if getErr := c.client.Get(ctx, idKey, &id); getErr != nil {
			return false, getErr
		}
		ready = meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		return ready != nil && ready.ObservedGeneration == id.Generation && ready.Status != metav1.ConditionTrue, nil
	})
	return ready
}

// TestAttack79NotReadyIdentityDisarmsGenerateTenantsNamespaceCheck (helper-45's F5,
// confirmed, and what it leads to). The provider keeps the consumer's tenant namespace in
// N (adopted by its administrator); the consumer peered with liqoctl authenticate and
// holds an accepted slice whose copy is in N. Its record is one written before the pin
// (no providerTenantNamespace). An Identity writer of the consumer's tenant namespace
// (identities get, update; nothing else) gives the control-plane Identity a proxy the
// consumer never pinned: the identity controller refuses it (ProxyNotPinned), and it
// still names N. The consumer's administrator runs liqoctl generate tenant with a fresh
// nonce and no --remote-tenant-namespace. What must hold: the run is refused (its
// Identity names another namespace than the one it would pin: TestAttack78), or at least,
// once the writer moves spec.namespace, liqoctl delete resourceslice never says "verified"
// while the slice identity still reads its copy in N.
func TestAttack79NotReadyIdentityDisarmsGenerateTenantsNamespaceCheck(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const n, name = "a79-consumer-space", "slice-a79"
	kc := pinAdoptedPeering(t, c, p, n, name)
	cTN := wire.TenantNamespaceName(p.id)
	idKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	// A record as a release before the pin wrote it.
	a77Unpin(t, c, p)

	// The Identity writer: one update, the Identity still naming N.
	write := a77IdentityWriter(t, c, p, "identity-writer-a79")
	write(func(id *authv1beta1.Identity) { id.Spec.AuthParams.ProxyURL = ptr.To("http://a79-proxy.invalid:3128") })
	ready := a79WaitRefused(t, c, idKey)
	t.Logf("the Identity, still naming %s, refused: %s: %s", n, ready.Reason, ready.Message)

	// The consumer's administrator: a new handshake by hand (no --remote-tenant-namespace).
	_, errOut, genErr := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", a79FreshNonce(t, c, p))
	t.Logf("generate tenant: err=%v\n%s", genErr, errOut)
	pinned := a77Pin(t, c, p)
	t.Logf("pin after generate tenant: %q (the provider keeps this cluster in %q)", pinned, n)
	assert.Error(t, genErr, "generate tenant pinned %q while this cluster's Identity of the provider names %q: its check skipped a refused Identity", pinned, n)

	// The writer moves spec.namespace (refused or not, liqoctl reads it).
	write(func(id *authv1beta1.Identity) {
		id.Spec.AuthParams.ProxyURL = nil
		id.Spec.Namespace = ptr.To("default")
	})
	pinDeleteSliceNeverFalselyVerified(t, c, p, n, name, kc)
}

// TestAttack79DryRunAndLatePinRefusal: no attacker needed, an attacker's pin made worse.
// The provider keeps the consumer's tenant namespace in N (adopted); the consumer's
// administrator first ran liqoctl generate tenant without --remote-tenant-namespace (it
// pinned liqo-tenant-<consumer>), then turns to liqoctl authenticate. What must hold:
// authenticate --dry-run does not plan a handshake the real run refuses, and the real run,
// refused for the pin, is refused before it applies a Tenant and has the provider issue a
// certificate ("a refused run changes nothing").
func TestAttack79DryRunAndLatePinRefusal(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const n = "a79-dry-space"
	startManager(t, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: cluster.TenantNamespaceLabels(c.id)}}))
	mustCLI(t, "create", "nonce", "--remote-cluster-id", c.id, "--adopt-tenant-namespace", "--kubeconfig", p.cp.Kubeconfig)
	nonce, _ := mustCLI(t, "get", "nonce", "--remote-cluster-id", c.id, "--kubeconfig", p.cp.Kubeconfig)
	mustCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce))
	require.Equal(t, wire.TenantNamespaceName(c.id), a77Pin(t, c, p), "setup: generate tenant pinned the protocol's namespace")

	dryOut, dryErrOut, dryErr := runCLI(t, pairArgs("authenticate", c, p, "--dry-run")...)
	t.Logf("authenticate --dry-run: err=%v\n%s\n%s", dryErr, dryErrOut, dryOut)
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--timeout", "60s")...)
	t.Logf("authenticate: err=%v\n%s", err, errOut)
	require.Error(t, err, "setup: the real run is refused (the pin is not the provider's namespace)")
	assert.Error(t, dryErr, "the dry run planned a handshake that the real run refuses (%v)", err)

	var tn authv1beta1.Tenant
	tErr := p.client.Get(ctx, client.ObjectKey{Namespace: n, Name: c.id}, &tn)
	issued := tErr == nil && tn.Status.AuthParams.HasCertificate()
	t.Logf("after the refused run: Tenant %s/%s on the provider: err=%v; a certificate issued: %v", n, c.id, tErr, issued)
	assert.True(t, apierrors.IsNotFound(tErr) || !issued, "the refused run applied a Tenant and had the provider issue a certificate before it looked at the pin")
}

// TestAttack79GenerateTenantRefusedForItsProxyPinsItsNamespace: a record as a release
// before the namespace pin wrote it (the proxy pinned, no tenant namespace). The
// consumer's administrator runs liqoctl generate tenant with another --tenant-proxy-url
// than the pinned one and a --remote-tenant-namespace (the Identity's). What must hold:
// refused (the proxy), and the record unchanged: 8fdb000 says "a refused run changes
// nothing"; pinRecord writes the namespace before it refuses the proxy.
func TestAttack79GenerateTenantRefusedForItsProxyPinsItsNamespace(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	a77Unpin(t, c, p)
	recordKey := client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(p.id)}
	var before corev1.ConfigMap
	require.NoError(t, c.client.Get(context.Background(), recordKey, &before))

	_, errOut, err := runCLI(t, "generate", "tenant", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--nonce", a79FreshNonce(t, c, p),
		"--remote-tenant-namespace", wire.TenantNamespaceName(c.id), "--tenant-proxy-url", "http://a79-proxy.invalid:3128")
	t.Logf("generate tenant: err=%v\n%s", err, errOut)
	require.Error(t, err, "setup: another proxy than the pinned one is refused")

	var after corev1.ConfigMap
	require.NoError(t, c.client.Get(context.Background(), recordKey, &after))
	assert.Equal(t, before.Data, after.Data, "a run refused for its proxy changed the record (pinned its tenant namespace)")
}
