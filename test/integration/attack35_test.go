package integration

// Attacks on issue 35 (declared peerings and the provider's approval gate), each acting as
// the weakest principal that could try it. A test marked FINDING fails on the code it
// attacks: it states what should hold.

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestAttack35ProviderTakesAnotherProvidersID (finding of attack35, fixed): the administrator of provider B
// installs B with the cluster ID of provider A, with which the consumer peered through
// liqoctl authenticate, and hands the consumer a peering user of B. The consumer's
// administrator declares a Peering to B, pinned as liqoctl generate peering pins it (the
// ID B says, B's CA). The consumer's manager records the Peering as the owner of the
// peering with A before anything checks that B is A; the handshake then fails on A's CA
// pin, and deleting the failed Peering leaves A, which the Peering never touched.
func TestAttack35ProviderTakesAnotherProvidersID(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "consumer", "provider-a", "provider-b")
	ids := []string{"cl-consumer", "cl-provider-a", "cl-provider-a"} // B takes A's ID
	sites := make([]*site, len(cps))
	for i, cp := range cps {
		mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", ids[i])
		sites[i] = &site{cp: cp, id: ids[i], client: newClient(t, cp.Config)}
	}
	c, pa, pb := sites[0], sites[1], sites[2]
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, pa)...)
	startManager(t, pb, "--api-server-url", pb.cp.URL)
	startManager(t, c)

	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", pb.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	info, err := authn.ReadKubeconfig([]byte(kubeconfig))
	require.NoError(t, err)
	fp, err := authn.CAFingerprint(info.CA)
	require.NoError(t, err)
	pe, s := declaredPeering("to-b", "bootstrap-b", []byte(kubeconfig), pb.id)
	pe.Spec.ProviderClusterID = authv1beta1.ClusterID(pb.id)
	pe.Spec.ProviderCAFingerprint = fp
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	eventually(t, 30*time.Second, "the Peering to B is decided", func(ctx context.Context) (bool, error) {
		var cur authv1beta1.Peering
		if getErr := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &cur); getErr != nil {
			return false, getErr
		}
		if cond := meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionReady); cond != nil {
			t.Logf("the Peering to B: %s %s: %s", cur.Status.State, cond.Reason, cond.Message)
		}
		return cur.Status.State == authv1beta1.PeeringFailed || cur.Status.State == authv1beta1.PeeringPeered, nil
	})

	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, pa.id)
	require.NoError(t, err)
	require.NotNil(t, rec)
	if rec.Peering != nil {
		assert.NotEqual(t, pe.Name, rec.Peering.Name,
			"the consumer's record of A (peered with liqoctl authenticate) now names Peering %q, declared for another provider, as its owner", pe.Name)
	}

	require.NoError(t, c.client.Delete(ctx, pe))
	leavingA := ""
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && leavingA == "" {
		var cur authv1beta1.Peering
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &cur); apierrors.IsNotFound(err) {
			break
		}
		if cond := meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionReady); cond != nil &&
			(cond.Reason == authv1beta1.ReasonPeeringLeaving || cond.Reason == authv1beta1.ReasonPeeringLeaveFailed) {
			leavingA = cond.Reason + ": " + cond.Message
		}
		time.Sleep(200 * time.Millisecond)
	}
	assert.Empty(t, leavingA, "the deleted Peering to B leaves the provider with A's ID")
	require.NoError(t, pa.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{}),
		"A keeps the consumer's Tenant: the Peering to B never peered with A")
	assertTenantAccess(t, pa, c, kubeconfigOf(t, c, pa))
}

// TestAttack35IdentityForgerSkipsTheHandshake (finding of attack35, fixed): while the provider's
// administrator has not approved the consumer, a principal who may create Identities in the
// consumer's tenant namespace and write Identity status (the Identity writer and the status
// writer of the threat table) creates the Identity of the provider and marks it Ready. The
// Peering then reports Peered, no handshake is run any more (what it decides comes from
// the forged status, not from the handshake's own Inspect), and its BootstrapRetired
// condition says there is no bootstrap credential to retire, while the peering user it
// used is still live on the provider.
func TestAttack35IdentityForgerSkipsTheHandshake(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("to-provider", "provider-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeeringWaitingForApproval, 30*time.Second)

	tn := wire.TenantNamespaceName(p.id)
	forger := principal(t, c, "identity-forger", tn, rule("authentication.liqo.io", "identities", "get", "create"),
		rule("authentication.liqo.io", "identities/status", "get", "update"))
	id := &authv1beta1.Identity{ObjectMeta: metaOf(tn, wire.IdentityName(p.id)),
		Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(p.id), Type: authv1beta1.ControlPlaneIdentityType}}
	require.NoError(t, forger.Create(ctx, id))
	forge := func() {
		var cur authv1beta1.Identity
		if err := forger.Get(ctx, client.ObjectKeyFromObject(id), &cur); err != nil {
			return
		}
		now := metav1.Now()
		later := metav1.NewTime(now.Add(time.Hour))
		cur.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: "abcd", NotBefore: &now, NotAfter: &later}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Forged", Message: "forged", ObservedGeneration: cur.Generation})
		_ = forger.Status().Update(ctx, &cur)
	}
	peered := ""
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && peered == "" {
		forge()
		var cur authv1beta1.Peering
		require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(pe), &cur))
		if cond := meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionReady); cond != nil && cond.Reason == authv1beta1.ReasonPeered {
			peered = cond.Message
			if b := meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionBootstrapRetired); b != nil {
				peered += " | BootstrapRetired " + string(b.Status) + " " + b.Reason + ": " + b.Message
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	assert.Empty(t, peered, "the Peering says Peered from an Identity status forged while the provider waits for its administrator's approval")
}

// peeredSites are a consumer and a provider with a manager each, peered through a
// declared Peering that lists no slice.
func peeredSites(t *testing.T) (c, p *site, pe *authv1beta1.Peering) {
	t.Helper()
	c, p = cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("to-provider", "provider-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(context.Background(), s))
	require.NoError(t, c.client.Create(context.Background(), pe))
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
	return c, p, pe
}

// TestAttack35SliceLabellerHasTheManagerDeleteASlice (finding of attack35, fixed): a ResourceSlice writer of
// the consumer's tenant namespace who may update slices but not delete them labels a
// slice the Peering did not make (one the consumer's administrator asked for) with
// liqo.io/peering=<the Peering>. The Peering's manager takes the label for its own mark and
// deletes the slice as no longer listed: the writer gets the delete it was not granted,
// and the provider's grant of that slice is withdrawn.
func TestAttack35SliceLabellerHasTheManagerDeleteASlice(t *testing.T) {
	t.Parallel()
	c, p, pe := peeredSites(t)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(p.id)
	rs := handshake.ForgeSlice(tn, "payload", p.id, "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	require.NoError(t, c.client.Create(ctx, rs), "the consumer's administrator asks for a slice")

	labeller := principal(t, c, "slice-labeller", tn, rule("authentication.liqo.io", "resourceslices", "get", "list", "update", "patch"))
	err := labeller.Delete(ctx, rs.DeepCopy())
	require.True(t, apierrors.IsForbidden(err), "the writer may not delete slices: %v", err)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur authv1beta1.ResourceSlice
		if getErr := labeller.Get(ctx, client.ObjectKeyFromObject(rs), &cur); getErr != nil {
			return getErr
		}
		cur.Labels[wire.PeeringLabel] = pe.Name
		return labeller.Update(ctx, &cur)
	}))
	time.Sleep(5 * time.Second)
	var cur authv1beta1.ResourceSlice
	err = c.client.Get(ctx, client.ObjectKeyFromObject(rs), &cur)
	require.NoError(t, err, "the slice the administrator asked for is still there")
	assert.True(t, cur.DeletionTimestamp.IsZero(), "the slice the administrator asked for is not being deleted")
}

// TestAttack35NamespaceSquatterBeforeThePeering: a namespace creator makes
// liqo-tenant-<provider>, labelled as its tenant namespace, before the consumer's
// administrator declares the Peering. The consumer's manager must not put the provider's
// Identity and kubeconfig in a namespace its squatter administers.
func TestAttack35NamespaceSquatterBeforeThePeering(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(p.id)
	squatter := principal(t, c, "namespace-squatter", "", rule("", "namespaces", "get", "create"))
	require.NoError(t, squatter.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn, Labels: cluster.TenantNamespaceLabels(p.id)}}))

	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("to-provider", "provider-bootstrap", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, s))
	require.NoError(t, c.client.Create(ctx, pe))
	var cond *metav1.Condition
	eventually(t, 20*time.Second, "the Peering fails", func(ctx context.Context) (bool, error) {
		var cur authv1beta1.Peering
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &cur); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(cur.Status.Conditions, authv1beta1.ConditionReady)
		return cur.Status.State == authv1beta1.PeeringFailed || cur.Status.State == authv1beta1.PeeringPeered, nil
	})
	assert.Equal(t, authv1beta1.ReasonHandshakeFailed, cond.Reason, cond.Message)
	assert.Contains(t, cond.Message, "this cluster never made it a tenant namespace")
	err := c.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.KubeconfigSecretName(wire.IdentityName(p.id))}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "no kubeconfig of the provider in the squatter's namespace: %v", err)
}

// TestAttack35DeniedConsumerReturnsWithAnotherKey (finding of attack35, fixed): on a provider that does not
// require approval, the administrator drains a consumer and denies it (liqoctl deny tenant
// says "a Tenant presenting another key later waits for a decision again"), then
// uncordons it, as TestApprovalPendingApprovedDenied does. The consumer's administrator,
// still holding its peering user, makes a new cluster key and authenticates again: the
// new key is neither denied nor waits, and gets a certificate and its access.
func TestAttack35DeniedConsumerReturnsWithAnotherKey(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)

	mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	mustCLI(t, "deny", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig, "--reason", "not a customer")
	mustCLI(t, "uncordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	waitTenantCondition(t, p, key, authv1beta1.ConditionApproved, metav1.ConditionFalse, authv1beta1.ReasonApprovalDenied)

	// The consumer's key changes; its administrator authenticates again with the peering user.
	require.NoError(t, c.client.Delete(ctx, &corev1.Secret{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.KeysSecretName)}))
	mustCLI(t, "install", "--kubeconfig", c.cp.Kubeconfig)
	_, errOut, err := runCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu, "--timeout", "20s")
	assert.Error(t, err, "the denied consumer, with another key, authenticates:\n%s", errOut)
	var got authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, key, &got))
	assert.Nil(t, got.Status.Certificate, "the denied consumer's new key got certificate %v", got.Status.Certificate)
}
