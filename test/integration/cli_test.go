package integration

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

var update = flag.Bool("update", false, "rewrite golden files")

// publishedSteps are the lines of Liqo's documentation, in order.
var publishedSteps = []string{
	"INFO (local) Tenant namespace correctly ensured",
	"INFO (remote) Tenant namespace correctly ensured",
	"INFO (remote) Nonce secret ensured",
	"INFO (remote) Nonce generated successfully",
	"INFO (remote) Nonce retrieved",
	"INFO (local) Signed nonce secret ensured",
	"INFO (local) Nonce is signed",
	"INFO (local) Signed nonce retrieved",
	"INFO (local) Tenant correctly generated",
	"INFO (remote) Tenant correctly applied on provider cluster",
	"INFO (remote) Tenant status is filled",
	"INFO (remote) Identity correctly generated",
	"INFO (local) Identity correctly applied on consumer cluster",
	"INFO (local) Identity status is filled",
}

func assertInOrder(t *testing.T, out string, lines []string) {
	t.Helper()
	rest := out
	for _, l := range lines {
		i := strings.Index(rest, l+"\n")
		require.GreaterOrEqualf(t, i, 0, "missing or out of order: %q in\n%s", l, out)
		rest = rest[i+len(l):]
	}
}

// cliSites starts two control planes and installs them with liqoctl install.
func cliSites(t *testing.T) (consumer, provider *site) {
	t.Helper()
	cps := testenv.New(t, "consumer", "provider")
	for i, id := range []string{"cl-consumer", "cl-provider"} {
		_, errOut := mustCLI(t, "install", "--kubeconfig", cps[i].Kubeconfig, "--cluster-id", id)
		assert.Contains(t, errOut, `Cluster ID "`+id+`" (created)`)
	}
	return &site{cp: cps[0], id: "cl-consumer", client: newClient(t, cps[0].Config)},
		&site{cp: cps[1], id: "cl-provider", client: newClient(t, cps[1].Config)}
}

func pairArgs(cmd string, consumer, provider *site, extra ...string) []string {
	return append([]string{cmd, "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", provider.cp.Kubeconfig}, extra...)
}

func kubeconfigOf(t *testing.T, consumer, provider *site) []byte {
	t.Helper()
	var s corev1.Secret
	require.NoError(t, consumer.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(provider.id),
		Name: wire.KubeconfigSecretName(wire.IdentityName(provider.id))}, &s))
	return s.Data[wire.KubeconfigField]
}

func TestCLIAuthenticateInProcess(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()

	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assertInOrder(t, errOut, publishedSteps)
	assert.Contains(t, errOut, "INFO (remote) No liqo-auth-manager runs in this cluster: its provider controllers run in-process for this command")
	assert.Contains(t, errOut, "INFO (local) No liqo-auth-manager runs in this cluster: its consumer controllers run in-process for this command")
	assertTenantAccess(t, provider, consumer, kubeconfigOf(t, consumer, provider))

	// A re-run is a no-op: nothing changes on either side.
	pTN := wire.TenantNamespaceName(consumer.id)
	var before authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &before))
	// No manager runs: liqoctl leaves the finalizer to the controllers, which add it once
	// they accept (a refused Tenant keeps none after the command ends).
	assert.NotContains(t, finalizerOwners(t, &before), wire.FieldOwner+" Apply")
	assert.Contains(t, before.Finalizers, wire.TenantFinalizer)
	_, errOut = mustCLI(t, pairArgs("auth", consumer, provider)...)
	assert.Contains(t, errOut, "nothing to do")
	var after authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &after))
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion)

	// What the administrator set survives a re-run, even one that must redo the Identity.
	patch := client.MergeFrom(after.DeepCopy())
	after.Spec.TenantCondition = authv1beta1.TenantConditionCordoned
	require.NoError(t, provider.client.Patch(ctx, &after, patch, client.FieldOwner("provider-admin")))
	require.NoError(t, consumer.client.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metaOf(wire.TenantNamespaceName(provider.id), wire.IdentityName(provider.id))}))
	_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "Tenant already accepted")
	assert.NotContains(t, errOut, "Nonce secret ensured", "an accepted Tenant needs no new nonce")
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &after))
	assert.Equal(t, authv1beta1.TenantConditionCordoned, after.Spec.TenantCondition)

	// Unauthenticate removes everything and proves it; running it again is fine.
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "INFO (remote) Access revoked: verified")
	err := provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &after)
	assert.True(t, apierrors.IsNotFound(err), "the Tenant is gone: %v", err)
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, provider.client.List(ctx, &csrs))
	assert.Empty(t, csrs.Items)
	var secrets corev1.SecretList
	require.NoError(t, consumer.client.List(ctx, &secrets, client.InNamespace(wire.TenantNamespaceName(provider.id))))
	assert.Empty(t, secrets.Items, "no kubeconfig or signed nonce is left on the consumer")
	_, errOut = mustCLI(t, pairArgs("unauth", consumer, provider, "--delete-namespaces")...)
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.Contains(t, errOut, "INFO (remote) No Tenant to delete", "it says what happened, not what did not")
	assert.NotContains(t, errOut, "INFO (remote) Tenant deleted")
	// Listed right after, as a user would: what the command calls deleted is gone.
	for _, s := range []struct {
		site *site
		ns   string
	}{{consumer, wire.TenantNamespaceName(provider.id)}, {provider, pTN}} {
		assert.Contains(t, errOut, "Tenant namespace "+s.ns+" deleted")
		var ns corev1.Namespace
		assert.True(t, apierrors.IsNotFound(s.site.client.Get(ctx, client.ObjectKey{Name: s.ns}, &ns)), "namespace %s is gone", s.ns)
	}
}

func TestCLIAuthenticateWithManagers(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	startManager(t, consumer)
	startManager(t, provider)
	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assertInOrder(t, errOut, publishedSteps)
	assert.NotContains(t, errOut, "in-process", "the running managers do the work")
	assertTenantAccess(t, provider, consumer, kubeconfigOf(t, consumer, provider))
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.NotContains(t, errOut, "in-process")
}

func TestCLIManualFlow(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	startManager(t, consumer)
	ctx := context.Background()
	C, P := []string{"--kubeconfig", consumer.cp.Kubeconfig}, []string{"--kubeconfig", provider.cp.Kubeconfig}
	args := func(base []string, extra ...string) []string { return append(append([]string{}, extra...), base...) }

	out, errOut := mustCLI(t, args(P, "create", "nonce", "--remote-cluster-id", consumer.id, "-o", "yaml")...)
	assert.Contains(t, errOut, "INFO Nonce created")
	assert.Contains(t, out, "kind: Secret")
	nonce, _ := mustCLI(t, args(P, "get", "nonce", "--remote-cluster-id", consumer.id)...)
	nonce = strings.TrimSpace(nonce)
	require.NoError(t, authn.CheckNonce(nonce), "get nonce prints the bare nonce")
	again, _ := mustCLI(t, args(P, "create", "nonce", "--remote-cluster-id", consumer.id)...)
	assert.Empty(t, again, "without -o, stdout stays empty")
	same, _ := mustCLI(t, args(P, "get", "nonce", "--remote-cluster-id", consumer.id)...)
	assert.Equal(t, nonce, strings.TrimSpace(same), "re-running create nonce keeps a young nonce")

	tenantYAML, errOut := mustCLI(t, args(C, "generate", "tenant", "--remote-cluster-id", provider.id, "--nonce", nonce)...)
	key, err := cluster.GetClusterKey(ctx, consumer.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	fp, _ := authn.Fingerprint(key.Public())
	assert.Contains(t, errOut, fp, "generate tenant prints the fingerprint of the key it hands over")
	applyYAML(t, provider.client, []byte(tenantYAML))

	// The provider refuses to hand over an Identity for a key the consumer did not announce.
	_, _, err = runCLI(t, args(P, "generate", "identity", "--remote-cluster-id", consumer.id, "--expect-fingerprint", "sha256:"+strings.Repeat("0", 64))...)
	require.ErrorContains(t, err, "not the expected")
	identityYAML, errOut := mustCLI(t, args(P, "generate", "identity", "--remote-cluster-id", consumer.id, "--expect-fingerprint", fp)...)
	assert.Contains(t, errOut, "It hands over CA sha256:")
	assert.Contains(t, errOut, "Next, on the consumer: kubectl apply this Identity; its kubeconfig Secret is written by the consumer's liqo-auth-manager", "issue 38 4b: what comes next")
	applyYAML(t, consumer.client, []byte(identityYAML))
	id := &authv1beta1.Identity{}
	eventually(t, 20*time.Second, "the consumer's manager writes the kubeconfig", func(ctx context.Context) (bool, error) {
		getErr := consumer.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(provider.id), Name: wire.IdentityName(provider.id)}, id)
		return meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), getErr
	})
	assertTenantAccess(t, provider, consumer, kubeconfigOf(t, consumer, provider))

	// The nonce is consumed, as the provider's tenant record says (its Secret is left as
	// issued): get nonce refuses it, and create nonce replaces it with a fresh one.
	_, _, err = runCLI(t, args(P, "get", "nonce", "--remote-cluster-id", consumer.id)...)
	require.ErrorContains(t, err, "was already used by the handshake accepted at")
	mustCLI(t, args(P, "create", "nonce", "--remote-cluster-id", consumer.id)...)
	fresh, _ := mustCLI(t, args(P, "get", "nonce", "--remote-cluster-id", consumer.id)...)
	require.NoError(t, authn.CheckNonce(strings.TrimSpace(fresh)))
	assert.NotEqual(t, nonce, strings.TrimSpace(fresh), "create nonce replaces the consumed nonce")

	info, _ := mustCLI(t, args(C, "info", "-o", "json")...)
	assert.Contains(t, info, `"clusterID": "cl-consumer"`)
	assert.Contains(t, info, `"cluster": "cl-provider"`)
	assert.Contains(t, info, `"ready": true`)
}

// TestCLILiqoPublishedYAML applies, unchanged, the v1alpha1 Tenant and Identity of Liqo's
// manual-flow documentation: the CRDs serve that version.
func TestCLILiqoPublishedYAML(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "liqo-docs")
	s := installSites(t, cps, "cl-provider")[0]
	ctx := context.Background()
	for _, ns := range []string{"default"} {
		for _, f := range []string{"liqo-docs-tenant.yaml", "liqo-docs-identity.yaml"} {
			data, err := os.ReadFile(filepath.Join("testdata", f))
			require.NoError(t, err)
			applyYAML(t, s.client, withNamespace(data, ns))
		}
	}
	var tn authv1beta1.Tenant
	require.NoError(t, s.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "cl-consumer"}, &tn))
	assert.Len(t, tn.Spec.PublicKey, 32, "the legacy raw Ed25519 key survives the round trip")
	assert.Equal(t, authv1beta1.TenantConditionActive, tn.Spec.TenantCondition)
	var id authv1beta1.Identity
	require.NoError(t, s.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "controlplane-cl-provider"}, &id))
	assert.Equal(t, "https://172.19.0.3:6443", id.Spec.AuthParams.APIServer)
}

func withNamespace(data []byte, ns string) []byte {
	return []byte(strings.Replace(string(data), "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1))
}

func TestCLIDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	count := func(s *site) int {
		var ns corev1.NamespaceList
		var sec corev1.SecretList
		require.NoError(t, s.client.List(ctx, &ns))
		require.NoError(t, s.client.List(ctx, &sec))
		return len(ns.Items)*1000 + len(sec.Items)
	}
	c0, p0 := count(consumer), count(provider)
	out, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider, "--dry-run")...)
	assert.Contains(t, errOut, "Would apply Tenant liqo-tenant-cl-consumer/cl-consumer")
	assert.Contains(t, out, `Permissions of user "cl-consumer"`)
	assert.Contains(t, out, "authentication.liqo.io/resourceslices")
	assert.NotContains(t, out, "secrets")
	assert.Equal(t, c0, count(consumer))
	assert.Equal(t, p0, count(provider))
}

func TestCLIInstallGolden(t *testing.T) {
	t.Parallel()
	out, errOut := mustCLI(t, "install", "-o", "yaml", "--cluster-id", "cl-golden", "--api-server-url", "https://provider.example.com:6443", "--certificate-lifetime", "24h")
	assert.Contains(t, errOut, "not printed")
	golden := filepath.Join("testdata", "install.golden.yaml")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out)
	assert.NotContains(t, out, "PRIVATE KEY")
}
