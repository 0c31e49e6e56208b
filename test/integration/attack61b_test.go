package integration

// Attack 61b: helper-27's attacks on the provider CA pinned on first use (38725b1).

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// advisedPatch is the kubectl patch of the consumer's tenant record a liqoctl or
// controller message advises: namespace, ConfigMap, patch type and patch.
var advisedPatch = regexp.MustCompile(`kubectl patch configmap -n (\S+) (\S+) --type=(json|merge) -p '([^']*)'`)

// settle polls cond until it holds or the timeout passes, and returns either way: the
// test's assertions say what must hold, settle only gives the controllers time.
func settle(timeout time.Duration, cond func(ctx context.Context) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond(ctx) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// runAdvisedPatch runs, as the consumer's administrator, the kubectl patch of the tenant
// record that msg advises, exactly as written.
func runAdvisedPatch(t *testing.T, s *site, msg string) string {
	t.Helper()
	m := advisedPatch.FindStringSubmatch(msg)
	require.NotNil(t, m, "the message advises no kubectl patch of the tenant record:\n%s", msg)
	pt := types.JSONPatchType
	if m[3] == "merge" {
		pt = types.MergePatchType
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = m[1], m[2]
	require.NoError(t, s.client.Patch(context.Background(), cm, client.RawPatch(pt, []byte(m[4]))))
	return m[0]
}

// peeredWithAnOlderCAPinned is a consumer peered with a provider by liqoctl authenticate,
// its controllers running, whose provider CA changed since it was pinned (setup: the
// administrator writes the fingerprint of another CA, returned, as the pin), with the
// fingerprint of the CA the provider presents now.
func peeredWithAnOlderCAPinned(t *testing.T) (c, p *site, providerFP string, oldCA *testenv.CA) {
	t.Helper()
	c, p = cliSites(t)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)
	providerFP, err := authn.CAFingerprint(p.cp.CA.CertPEM)
	require.NoError(t, err)
	oldCA, err = testenv.NewCA("provider-before-rotation")
	require.NoError(t, err)
	oldFP, err := authn.CAFingerprint(oldCA.CertPEM)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = wire.DefaultLiqoNamespace, wire.TenantRecordName(p.id)
	require.NoError(t, c.client.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"caFingerprint":"`+oldFP+`"}}`))))
	return c, p, providerFP, oldCA
}

// TestAttack61bAdvisedCAUnpinLetsAnIdentityWriterChooseTheCA acts as an Identity writer
// of the consumer's tenant namespace (identities get, update), on a consumer peered with
// liqoctl authenticate whose pinned provider CA is no longer the one the provider presents
// (the provider's CA changed: emulated by the administrator writing an older CA's
// fingerprint as the pin). The administrator re-runs liqoctl authenticate, which is
// refused and advises a command; the administrator runs exactly that command, then
// authenticate again. Meanwhile the writer has rewritten the control-plane Identity with
// its own CA and API server and a certificate its CA issued to the consumer for the
// consumer's own key (read from the certificate the Identity carried). What must hold
// (docs/security.md, Identity: "never an unpin that would let the next Identity, whoever
// wrote it, choose"): the advised command leaves no moment in which the writer's Identity
// chooses the pin; the re-run goes on, the record pins the provider's CA, and the
// kubeconfig reaches the provider, not the writer's server. The advice pins the CA the
// provider presents in place of the old (cluster.RepinCACommand). Found by helper-27 on
// 38725b1, where authenticate (pinRecord) advised removing the pin: the identity
// controller, which watches the record, took the writer's Identity the moment the pin was
// gone and pinned its CA, and the re-run was refused, saying the writer's CA was pinned
// "at an earlier handshake".
func TestAttack61bAdvisedCAUnpinLetsAnIdentityWriterChooseTheCA(t *testing.T) {
	t.Parallel()
	c, p, providerFP, _ := peeredWithAnOlderCAPinned(t)
	ctx := context.Background()
	cTN := wire.TenantNamespaceName(p.id)
	cpKey := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}

	// The administrator re-runs the handshake: refused, with advice.
	_, _, err := runCLI(t, pairArgs("authenticate", c, p)...)
	require.Error(t, err, "authenticate took a provider CA other than the pinned one")
	advice := err.Error()
	t.Logf("authenticate refused: %s", advice)

	// The Identity writer's Identity: its own CA and server, a certificate for the
	// consumer's own key (every certificate issued to the consumer carries it).
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	attackerCA, err := testenv.NewCA("attacker")
	require.NoError(t, err)
	attackerFP, err := authn.CAFingerprint(attackerCA.CertPEM)
	require.NoError(t, err)
	const attackerServer = "https://apiserver.attacker.example:6443"
	rewrite(t, writer, cpKey, false, func(id *authv1beta1.Identity) {
		cert, parseErr := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
		require.NoError(t, parseErr)
		id.Spec.AuthParams.CA = attackerCA.CertPEM
		id.Spec.AuthParams.SignedCRT = issueCert(t, attackerCA, cert.PublicKey, c.id)
		id.Spec.AuthParams.APIServer = attackerServer
	})

	// The administrator runs the advised command, exactly as written.
	ran := runAdvisedPatch(t, c, advice)
	t.Logf("the administrator ran: %s", ran)
	// The identity controller decides on the writer's Identity against the record as it
	// now is (read by the test, not the writer): settled when something is pinned and the
	// Identity is taken or refused against that pin.
	settle(10*time.Second, func(ctx context.Context) bool {
		rec, getErr := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
		if getErr != nil || rec == nil || rec.CAFingerprint == "" {
			return false
		}
		var id authv1beta1.Identity
		if getErr = c.client.Get(ctx, cpKey, &id); getErr != nil {
			return false
		}
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		if ready == nil || id.Status.ObservedGeneration != id.Generation {
			return false
		}
		return ready.Status == metav1.ConditionTrue || strings.Contains(ready.Message, "pinned CA "+rec.CAFingerprint)
	})
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.NotEqual(t, attackerFP, rec.CAFingerprint, "after the advised %q, the identity controller pinned the Identity writer's CA", ran)

	// The administrator re-runs the handshake, as advised.
	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	assert.NoError(t, err, "the re-run the advice promised could not mend the peering\nstderr:\n%s", errOut)
	if err != nil {
		assert.NotContains(t, err.Error(), "pinned CA "+attackerFP+" for provider \""+p.id+"\" at an earlier handshake",
			"the refusal says a handshake pinned the Identity writer's CA")
	}
	rec, err = cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.Equal(t, providerFP, rec.CAFingerprint, "the record pins another CA than the provider's (the writer's is %s)", attackerFP)
	var s corev1.Secret
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(cpKey.Name)}, &s))
	assert.NotContains(t, string(s.Data[wire.KubeconfigField]), attackerServer, "the consumer's kubeconfig of the provider reaches the Identity writer's server")
}

// TestAttack61bAdvisedCAUnpinIsTakenBackByTheOldIdentity: no attacker, what a real
// administrator does when the provider's CA changed (emulated as setup: the consumer's
// control-plane Identity and pin are those of the provider's previous CA, which issued a
// certificate, still valid, for the consumer's key). liqoctl authenticate is refused and
// advises a command; the administrator runs exactly that, then authenticate again. What
// must hold: the re-run goes on and the record pins the provider's CA. Found by helper-27
// on 38725b1, where the advice was an unpin and the refused run left the old Identity in
// place (it pinned before it applied): the identity controller, which watches the tenant
// record, reconciled the old Identity the moment the pin was gone, accepted it (its
// certificate passes every check) and pinned the old CA again, so the re-run was refused
// with the same advice, for ever (as helper-26 found for the proxy pin,
// TestAttack60cAdvisedUnpinIsTakenBackByTheIdentityController).
func TestAttack61bAdvisedCAUnpinIsTakenBackByTheOldIdentity(t *testing.T) {
	t.Parallel()
	c, p, providerFP, oldCA := peeredWithAnOlderCAPinned(t)
	oldFP, err := authn.CAFingerprint(oldCA.CertPEM)
	require.NoError(t, err)
	cpKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}

	// Setup: the old Identity, from the CA the provider had before.
	rewrite(t, c.client, cpKey, false, func(id *authv1beta1.Identity) {
		cert, parseErr := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
		require.NoError(t, parseErr)
		id.Spec.AuthParams.CA = oldCA.CertPEM
		id.Spec.AuthParams.SignedCRT = issueCert(t, oldCA, cert.PublicKey, c.id)
	})
	eventually(t, 30*time.Second, "the old Identity taken", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if getErr := c.client.Get(ctx, cpKey, &id); getErr != nil {
			return false, getErr
		}
		return id.Status.ObservedGeneration == id.Generation && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), nil
	})

	_, _, err = runCLI(t, pairArgs("authenticate", c, p)...)
	require.Error(t, err, "authenticate took a provider CA other than the pinned one")
	ran := runAdvisedPatch(t, c, err.Error())
	t.Logf("the administrator ran: %s", ran)
	settle(5*time.Second, func(ctx context.Context) bool {
		rec, getErr := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
		return getErr == nil && rec != nil && rec.CAFingerprint != ""
	})

	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	assert.NoError(t, err, "the re-run the advice promised could not mend the peering\nstderr:\n%s", errOut)
	rec, err := cluster.GetTenantRecord(context.Background(), c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.Equal(t, providerFP, rec.CAFingerprint, "the record pins another CA than the provider's (the old one is %s)", oldFP)
}
