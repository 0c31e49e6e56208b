package integration

import (
	"context"
	"crypto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// sliceSites are a consumer authenticated with a provider, both running their controllers
// for the whole test.
func sliceSites(t *testing.T, provider ...func(*authmanager.Options)) (consumer, prov *site) { //nolint:unparam // the provider's options are the hook a slice test uses to tune its manager
	t.Helper()
	consumer, prov = cliSites(t)
	startControllers(t, prov, authmanager.Provider, provider...)
	startControllers(t, consumer, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", consumer, prov)...)
	return consumer, prov
}

// localSlice is a slice as liqoctl create resourceslice (and Liqo's) writes it.
func localSlice(_, p *site, name, class string, cpu string) *authv1beta1.ResourceSlice { //nolint:unparam // class is the slice's field as liqoctl writes it; the tests use the default class
	return &authv1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: wire.TenantNamespaceName(p.id), Name: name, Labels: map[string]string{
			wire.RemoteClusterIDLabel: p.id, wire.ReplicationRequestedLabel: "true", "liqo.io/remoteID": p.id}},
		Spec: authv1beta1.ResourceSliceSpec{Class: authv1beta1.ResourceSliceClass(class),
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
	}
}

func waitSliceDecided(t *testing.T, s *site, rs *authv1beta1.ResourceSlice) {
	t.Helper()
	eventually(t, 30*time.Second, "slice "+rs.Name+" decided", func(ctx context.Context) (bool, error) {
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		auth := authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication)
		res := authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionResources)
		if auth != nil && auth.Status == authv1beta1.ResourceSliceDenied || res != nil && res.Status == authv1beta1.ResourceSliceDenied {
			return true, nil
		}
		return res != nil && rs.Status.AuthParams != nil && len(rs.Status.AuthParams.SignedCRT) > 0, nil
	})
}

func sliceKubeconfig(t *testing.T, c, p *site, name string) []byte {
	t.Helper()
	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the slice Identity is ready", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.SliceIdentityName(name)}, &id)
		return err == nil && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), client.IgnoreNotFound(err)
	})
	var s corev1.Secret
	require.NoError(t, c.client.Get(context.Background(), client.ObjectKey{Namespace: id.Namespace, Name: wire.KubeconfigSecretName(id.Name)}, &s))
	return s.Data[wire.KubeconfigField]
}

// canI asks, as the holder of kubeconfig, whether it may do verb on resource in ns.
func canI(t *testing.T, kubeconfig []byte, verb, group, res, ns, name string) bool {
	t.Helper()
	return selfCan(t, newClient(t, restConfigFromKubeconfig(t, kubeconfig)), verb, group, res, ns, name)
}

// selfCan asks, as the user of c (a SelfSubjectAccessReview), whether it may do verb on
// resource in ns.
func selfCan(t *testing.T, c client.Client, verb, group, resource, ns, name string) bool {
	t.Helper()
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name}}}
	require.NoError(t, c.Create(context.Background(), r))
	return r.Status.Allowed
}

// TestResourceSliceFlow: a consumer's slice is written to the provider, accepted, and
// turned into a narrower identity that may read its own slice and nothing else.
func TestResourceSliceFlow(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	rs := localSlice(c, p, "slice-a", "", "2")
	require.NoError(t, c.client.Create(ctx, rs))
	waitSliceDecided(t, c, rs)
	auth := authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication)
	require.NotNil(t, auth)
	assert.Equal(t, authv1beta1.ResourceSliceAccepted, auth.Status, auth.Message)
	assert.Equal(t, authv1beta1.ReasonSliceAuthenticationAccepted, auth.Reason)
	assert.Equal(t, "2", ptrQuantity(rs.Status.Resources, corev1.ResourceCPU))
	assert.Equal(t, authv1beta1.ResourceSliceClass("default"), rs.Status.Class)

	kc := sliceKubeconfig(t, c, p, "slice-a")
	info, err := authn.ReadKubeconfig(kc)
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	assert.Equal(t, authn.SliceUserName("slice-a", c.id), cert.Subject.CommonName)
	assert.Equal(t, []string{c.id}, cert.Subject.Organization)

	pTN := wire.TenantNamespaceName(c.id)
	assert.True(t, canI(t, kc, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-a"), "reads its own slice")
	for _, deny := range [][4]string{
		{"get", "authentication.liqo.io", "resourceslices", "other"},
		{"create", "authentication.liqo.io", "resourceslices", ""},
		{"get", "", "secrets", ""},
		{"create", "", "secrets", ""},
		{"create", "", "pods", ""},
		{"get", "authentication.liqo.io", "tenants", c.id},
		{"list", "", "nodes", ""},
	} {
		assert.False(t, canI(t, kc, deny[0], deny[1], deny[2], pTN, deny[3]), "may not %v", deny)
	}
	assert.False(t, canI(t, kc, "list", "", "namespaces", "", ""), "nothing cluster-wide")
}

func ptrQuantity(l corev1.ResourceList, n corev1.ResourceName) string {
	q, ok := l[n]
	if !ok {
		return ""
	}
	return q.String()
}

func sliceArgs(cmd, name string, c, p *site, extra ...string) []string {
	return append([]string{cmd, "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id}, extra...)
}

// TestCLIResourceSlices drives ResourceSlices as the administrators do, with managers on
// both clusters: several slices, a denied class, cordon, uncordon, deletion with its proof,
// drain with its proof, and unauthenticate refusing while slices exist.
func TestCLIResourceSlices(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	startManager(t, p, "--resource-slice-classes=gpu")
	startManager(t, c)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN := wire.TenantNamespaceName(c.id)

	_, errOut := mustCLI(t, sliceArgs("create", "slice-a", c, p, "--cpu", "2", "--memory", "4Gi")...)
	assertInOrder(t, errOut, []string{
		"INFO (local) ResourceSlice liqo-tenant-cl-provider/slice-a created, asking for cpu=2,memory=4Gi",
		"INFO (remote) ResourceSlice accepted: class default, cpu=2,memory=4Gi",
		"INFO (local) Identity resourceslice-slice-a ready: kubeconfig in Secret liqo-tenant-cl-provider/kubeconfig-resourceslice-slice-a"})
	_, errOut = mustCLI(t, sliceArgs("create", "slice-b", c, p, "--class", "gpu", "--pods", "10")...)
	assert.Contains(t, errOut, "ResourceSlice accepted: class gpu, pods=10")
	kcA, kcB := sliceKubeconfig(t, c, p, "slice-a"), sliceKubeconfig(t, c, p, "slice-b")
	out, _ := mustCLI(t, "info", "--kubeconfig", c.cp.Kubeconfig)
	assert.Regexp(t, `slice-a\s+consumer\s+cl-provider\s+cpu=2,memory=4Gi\s+\S+\s+Accepted`, out)
	out, _ = mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
	assert.Regexp(t, `slice-b\s+provider\s+cl-consumer\s+pods=10\s+\S+\s+Accepted`, out)
	assert.True(t, canI(t, kcA, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-a"))
	assert.False(t, canI(t, kcA, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-b"), "each slice identity reads its own slice only")

	_, _, err := runCLI(t, sliceArgs("create", "slice-c", c, p, "--class", "fpga")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the provider denied ResourceSlice slice-c: ResourceSliceResourcesDenied (Resources): class "fpga" is not offered by this provider (offered: default, gpu)`)
	var denied authv1beta1.Identity
	assert.True(t, apierrorsIsNotFound(c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.SliceIdentityName("slice-c")}, &denied)), "a denied slice has no identity")

	out, _ = mustCLI(t, sliceArgs("create", "slice-y", c, p, "--cpu", "1", "-o", "yaml")...)
	assert.Contains(t, out, "liqo.io/replication: \"true\"")
	assert.Contains(t, out, "kind: ResourceSlice")
	assert.True(t, apierrorsIsNotFound(c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: "slice-y"}, &authv1beta1.ResourceSlice{})), "-o yaml creates nothing")

	// Cordon: existing slices stay, no new one.
	_, errOut = mustCLI(t, "cordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, errOut, "is Cordoned")
	_, _, err = runCLI(t, sliceArgs("create", "slice-d", c, p, "--timeout", "20s")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is Cordoned: it gets no new ResourceSlice")
	assert.True(t, canI(t, kcA, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-a"), "a cordoned tenant keeps its slices")
	mustCLI(t, "uncordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	rsD := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: wire.TenantNamespaceName(p.id), Name: "slice-d"}}
	eventually(t, 30*time.Second, "uncordoned, the waiting slice is accepted", func(ctx context.Context) (bool, error) {
		if getErr := c.client.Get(ctx, client.ObjectKeyFromObject(rsD), rsD); getErr != nil {
			return false, getErr
		}
		ok, _ := sliceAccepted(rsD)
		return ok && rsD.Status.AuthParams != nil, nil
	})

	// Unauthenticate refuses while slices exist.
	_, _, err = runCLI(t, pairArgs("unauthenticate", c, p)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this cluster holds ResourceSlices from provider \"cl-provider\": slice-a, slice-b, slice-c, slice-d")

	// Delete one slice: its identity loses its access, proven with its own certificate.
	_, errOut = mustCLI(t, sliceArgs("delete", "slice-b", c, p)...)
	assert.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	assert.False(t, canI(t, kcB, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-b"))

	// Drain: every slice goes, every identity loses its access.
	_, errOut = mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, errOut, "Access of the control plane and of 3 slice identities revoked: verified")
	assert.False(t, canI(t, kcA, "get", "authentication.liqo.io", "resourceslices", pTN, "slice-a"))
	var left authv1beta1.ResourceSliceList
	require.NoError(t, p.client.List(ctx, &left, client.InNamespace(pTN)))
	assert.Empty(t, left.Items)
	mustCLI(t, "uncordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)

	_, errOut = mustCLI(t, pairArgs("unauthenticate", c, p, "--delete-resourceslices")...)
	assert.Contains(t, errOut, "Access revoked: verified")
	var mine authv1beta1.ResourceSliceList
	require.NoError(t, c.client.List(ctx, &mine))
	assert.Empty(t, mine.Items, "the consumer's slices are gone")
}

func sliceAccepted(rs *authv1beta1.ResourceSlice) (bool, string) {
	auth := authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication)
	if auth == nil {
		return false, "undecided"
	}
	return auth.Status == authv1beta1.ResourceSliceAccepted, auth.Message
}

func apierrorsIsNotFound(err error) bool { return apierrors.IsNotFound(err) }

// providerCopy is a slice as a consumer's control-plane identity writes it into its
// tenant namespace on the provider.
func providerCopy(ns, name, consumerID string, csr []byte) *authv1beta1.ResourceSlice {
	return &authv1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			wire.RemoteClusterIDLabel: consumerID, wire.ReplicationStatusLabel: "true", wire.ReplicationOriginLabel: consumerID}},
		Spec: authv1beta1.ResourceSliceSpec{ConsumerClusterID: ptrClusterID(consumerID), CSR: csr,
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}
}

func ptrClusterID(id string) *authv1beta1.ClusterID { c := authv1beta1.ClusterID(id); return &c }

func sliceCSR(t *testing.T, key crypto.Signer, cn, org string) []byte {
	t.Helper()
	csr, err := authn.ForgeCSRFor(key, cn, org)
	require.NoError(t, err)
	return csr
}

// waitSliceDenied waits for the provider to deny slice rs (condition type typ), and checks
// the condition's reason and that its message contains words.
func waitSliceDenied(t *testing.T, p *site, rs *authv1beta1.ResourceSlice, typ, reason, words string) {
	t.Helper()
	eventually(t, 20*time.Second, "slice "+rs.Name+" denied", func(ctx context.Context) (bool, error) {
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		c := authv1beta1.SliceCondition(rs.Status.Conditions, typ)
		return c != nil && c.Status == authv1beta1.ResourceSliceDenied, nil
	})
	c := authv1beta1.SliceCondition(rs.Status.Conditions, typ)
	assert.Equal(t, reason, c.Reason)
	assert.Contains(t, c.Message, words)
}

// expectSliceDenied waits for the provider to deny slice rs (condition type typ, message
// containing words), checks the Warning Event, and that no certificate was requested.
func expectSliceDenied(t *testing.T, p *site, rs *authv1beta1.ResourceSlice, typ, reason, words string) {
	t.Helper()
	waitSliceDenied(t, p, rs, typ, reason, words)
	assert.Nil(t, rs.Status.AuthParams, "nothing issued")
	waitEvent(t, p, rs.Namespace, rs.Name, reason)
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(context.Background(), &csrs, client.MatchingLabels{wire.TenantUIDLabel: string(rs.UID)}))
	assert.Empty(t, csrs.Items, "no certificate requested for a denied slice")
}

// TestResourceSliceAttacks: the weakest principal that can write slices, another tenant's
// control-plane identity (or anyone allowed to write slices in a tenant namespace), gets
// nothing signed for a slice in the wrong namespace, for another cluster, with another key
// or a foreign subject; TolerateNoHandshake skips the key match only where the provider's
// administrator allowed it.
func TestResourceSliceAttacks(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "slice-provider"), "cl-provider")[0]
	runner := startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	a, b := newAttacker(t, "cl-alice"), newAttacker(t, "cl-bob")
	ta, tb := honestHandshake(t, p, a), honestHandshake(t, p, b)
	bob := userClient(t, p, tb.Status.AuthParams.SignedCRT, b.key)

	// An honest slice of Alice's, for reference, is accepted.
	honest := providerCopy(ta.Namespace, "alice-1", a.id, sliceCSR(t, a.key, authn.SliceUserName("alice-1", a.id), a.id))
	require.NoError(t, userClient(t, p, ta.Status.AuthParams.SignedCRT, a.key).Create(ctx, honest))
	eventually(t, 20*time.Second, "Alice's slice is accepted and issued", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(honest), honest)
		return err == nil && honest.Status.AuthParams != nil && len(honest.Status.AuthParams.SignedCRT) > 0, err
	})

	other, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, words string
		rs          *authv1beta1.ResourceSlice
	}{
		{"for Alice, in Bob's namespace", "tenant namespace", providerCopy(tb.Namespace, "as-alice", a.id, sliceCSR(t, b.key, authn.SliceUserName("as-alice", a.id), a.id))},
		{"with a key Bob's Tenant never presented", "different key", providerCopy(tb.Namespace, "other-key", b.id, sliceCSR(t, other, authn.SliceUserName("other-key", b.id), b.id))},
		{"with a foreign common name", "common name", providerCopy(tb.Namespace, "foreign-cn", b.id, sliceCSR(t, b.key, "system:admin", b.id))},
		{"in Alice's group", "organization", providerCopy(tb.Namespace, "alice-group", b.id, sliceCSR(t, b.key, authn.SliceUserName("alice-group", b.id), a.id))},
		{"with the control-plane subject", "common name", providerCopy(tb.Namespace, "control-plane", b.id, sliceCSR(t, b.key, b.id, "liqo.io"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, bob.Create(ctx, tc.rs), "Bob's control-plane identity may write slices in its namespace")
			expectSliceDenied(t, p, tc.rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, tc.words)
		})
	}

	// A slice written outside every tenant namespace, by someone who may write slices there.
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "look-alike", Labels: cluster.TenantNamespaceLabels(b.id)}}))
	mallory := principal(t, p, "slice-writer", "look-alike", rule("authentication.liqo.io", "resourceslices", "create", "get"))
	stray := providerCopy("look-alike", "stray", b.id, sliceCSR(t, b.key, authn.SliceUserName("stray", b.id), b.id))
	require.NoError(t, mallory.Create(ctx, stray))
	expectSliceDenied(t, p, stray, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, "not the tenant namespace")

	// TolerateNoHandshake, set on Bob's Tenant by whoever may write it, does not skip the
	// key match unless the provider's administrator started the manager to honor it.
	tenantWriter := tenantSpecWriter(t, p, tb.Namespace)
	require.NoError(t, tenantWriter.Get(ctx, client.ObjectKeyFromObject(tb), tb))
	policy := authv1beta1.TolerateNoHandshake
	tb.Spec.AuthzPolicy = &policy
	require.NoError(t, tenantWriter.Update(ctx, tb))
	loose := providerCopy(tb.Namespace, "no-handshake", b.id, sliceCSR(t, other, authn.SliceUserName("no-handshake", b.id), b.id))
	require.NoError(t, bob.Create(ctx, loose))
	expectSliceDenied(t, p, loose, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, "different key")
	require.NoError(t, runner.Stop())
	startControllers(t, p, authmanager.Provider, func(o *authmanager.Options) { o.HonorNoHandshake = true })
	eventually(t, 20*time.Second, "honored, TolerateNoHandshake skips the key match", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(loose), loose)
		ok, _ := sliceAccepted(loose)
		return ok && loose.Status.AuthParams != nil, err
	})
}

// TestResourceSliceRenewalAndRestarts: a slice's certificate is renewed by the provider
// and picked up by the consumer like the control-plane one; controllers stopped in the
// middle of a request pick it up where it stopped.
func TestResourceSliceRenewalAndRestarts(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	renewing := func(o *authmanager.Options) {
		o.Tenant.CertificateLifetime, o.Tenant.RenewBefore = 10*time.Minute, 594*time.Second
	}
	provider := startControllers(t, p, authmanager.Provider, renewing)
	mustCLI(t, pairArgs("authenticate", c, p)...)

	// The consumer's controllers are not running when the slice is asked for.
	rs := localSlice(c, p, "renewing", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	require.NoError(t, provider.Stop())
	consumer := startControllers(t, c, authmanager.Consumer)
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(rs), rs))
	assert.Nil(t, authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication), "nobody decides while the provider is down")
	startControllers(t, p, authmanager.Provider, renewing)
	waitSliceDecided(t, c, rs)
	require.NoError(t, consumer.Stop())
	startControllers(t, c, authmanager.Consumer)

	serial := func() string {
		var id authv1beta1.Identity
		if err := c.client.Get(ctx, handshakeSliceIdentity(p, "renewing"), &id); err != nil || id.Status.Certificate == nil {
			return ""
		}
		return id.Status.Certificate.SerialNumber
	}
	seen := map[string]bool{}
	eventually(t, 60*time.Second, "the slice identity holds two renewed certificates in turn", func(context.Context) (bool, error) {
		if s := serial(); s != "" {
			seen[s] = true
		}
		return len(seen) >= 3, nil
	})
	kc := sliceKubeconfig(t, c, p, "renewing")
	assert.True(t, canI(t, kc, "get", "authentication.liqo.io", "resourceslices", wire.TenantNamespaceName(c.id), "renewing"), "the renewed kubeconfig works")
}

func handshakeSliceIdentity(p *site, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.SliceIdentityName(name)}
}

// TestLiqoResourceSliceYAML: a ResourceSlice as Liqo's liqoctl create resourceslice -o yaml
// writes it (re-typed from Liqo's documentation) applies and is served as asked.
func TestLiqoResourceSliceYAML(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	applyYAML(t, c.client, []byte(`apiVersion: authentication.liqo.io/v1beta1
kind: ResourceSlice
metadata:
  labels:
    liqo.io/remote-cluster-id: cl-provider
    liqo.io/remoteID: cl-provider
    liqo.io/replication: "true"
  name: mypool
  namespace: liqo-tenant-cl-provider
spec:
  class: default
  providerClusterID: cl-provider
  resources:
    cpu: "4"
    memory: 8Gi
`))
	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-cl-provider", Name: "mypool"}}
	waitSliceDecided(t, c, rs)
	ok, words := sliceAccepted(rs)
	assert.True(t, ok, words)
	assert.Equal(t, "cpu=4,memory=8Gi", authv1beta1.FormatResources(rs.Status.Resources))
	sliceKubeconfig(t, c, p, "mypool")
}

// TestResourceSliceLimits: what the provider's administrator lets a tenant hold together
// caps its slices; a slice that does not fit is denied saying how much is granted, and is
// accepted once the limit allows it.
func TestResourceSliceLimits(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	_, errOut := mustCLI(t, "limit", "tenant", c.id, "--cpu", "3", "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, errOut, "may hold together at most cpu=3")
	_, _, err := runCLI(t, "limit", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "give at least one of --cpu, --memory, --pods, or --clear")

	first := localSlice(c, p, "l1", "", "2")
	require.NoError(t, c.client.Create(ctx, first))
	waitSliceDecided(t, c, first)
	ok, words := sliceAccepted(first)
	require.True(t, ok, words)

	second := localSlice(c, p, "l2", "", "2")
	require.NoError(t, c.client.Create(ctx, second))
	waitSliceDecided(t, c, second)
	res := authv1beta1.SliceCondition(second.Status.Conditions, authv1beta1.ResourceSliceConditionResources)
	require.NotNil(t, res)
	assert.Equal(t, authv1beta1.ResourceSliceDenied, res.Status)
	assert.Contains(t, res.Message, "cpu=2 asked, 2 of the 3 this tenant may hold already granted")

	third := localSlice(c, p, "l3", "", "1")
	require.NoError(t, c.client.Create(ctx, third))
	waitSliceDecided(t, c, third)
	ok, words = sliceAccepted(third)
	assert.True(t, ok, "what is left fits: %s", words)

	mustCLI(t, "limit", "tenant", c.id, "--clear", "--kubeconfig", p.cp.Kubeconfig)
	eventually(t, 30*time.Second, "without a limit the denied slice is accepted", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			return false, err
		}
		res := authv1beta1.SliceCondition(second.Status.Conditions, authv1beta1.ResourceSliceConditionResources)
		return res != nil && res.Status == authv1beta1.ResourceSliceAccepted && second.Status.AuthParams != nil, nil
	})
}

// forgeGrant writes, as writer, a slice status saying the provider accepted it with
// resources.
func forgeGrant(t *testing.T, writer client.Client, rs *authv1beta1.ResourceSlice, resources corev1.ResourceList) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, writer.Get(ctx, client.ObjectKeyFromObject(rs), rs))
	now := metav1.Now()
	for _, typ := range []string{authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceConditionResources} {
		authv1beta1.SetSliceCondition(&rs.Status.Conditions, typ, authv1beta1.ResourceSliceAccepted, "Forged", "forged", now)
	}
	rs.Status.Resources = resources
	require.NoError(t, writer.Status().Update(ctx, rs), "a status writer may write the slice status")
}

// TestResourceSliceStatusIsNotTrusted: whoever may write slice status (Liqo's
// liqo-remote-controlplane lets the tenant itself) cannot make a Cordoned tenant's new
// slice count as granted, nor shrink what other slices hold to fit under a limit: the
// provider judges from its own record of the grants.
func TestResourceSliceStatusIsNotTrusted(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "slice-status"), "cl-provider")[0]
	runner := startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	b := newAttacker(t, "cl-bob")
	tb := honestHandshake(t, p, b)
	bob := userClient(t, p, tb.Status.AuthParams.SignedCRT, b.key)
	forger := principal(t, p, "slice-status-writer", tb.Namespace, rule("authentication.liqo.io", "resourceslices", "get"),
		rule("authentication.liqo.io", "resourceslices/status", "get", "update", "patch"))
	slice := func(name, cpu string) *authv1beta1.ResourceSlice {
		rs := providerCopy(tb.Namespace, name, b.id, sliceCSR(t, b.key, authn.SliceUserName(name, b.id), b.id))
		rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		return rs
	}
	restart := func() {
		require.NoError(t, runner.Stop())
		runner = startControllers(t, p, authmanager.Provider)
	}

	// Cordoned: a new slice whose status was forged as accepted gets nothing.
	mustCLI(t, "cordon", "tenant", b.id, "--kubeconfig", p.cp.Kubeconfig)
	require.NoError(t, runner.Stop())
	forged := slice("forged", "1")
	require.NoError(t, bob.Create(ctx, forged))
	forgeGrant(t, forger, forged, forged.Spec.Resources)
	runner = startControllers(t, p, authmanager.Provider)
	expectSliceDenied(t, p, forged, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, "is Cordoned")
	mustCLI(t, "uncordon", "tenant", b.id, "--kubeconfig", p.cp.Kubeconfig)
	require.NoError(t, bob.Delete(ctx, forged))

	// Limits: shrinking the other slices' status does not make room.
	require.NoError(t, cluster.UpdateTenantRecord(ctx, p.client, p.client, wire.DefaultLiqoNamespace, b.id, false, func(rec *cluster.TenantRecord) error {
		rec.SliceLimits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		return nil
	}))
	first := slice("big-1", "2")
	require.NoError(t, bob.Create(ctx, first))
	eventually(t, 20*time.Second, "the first slice is granted", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(first), first)
		return err == nil && first.Status.AuthParams != nil, err
	})
	require.NoError(t, runner.Stop())
	second := slice("big-2", "2")
	require.NoError(t, bob.Create(ctx, second))
	forgeGrant(t, forger, first, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")})
	forgeGrant(t, forger, second, second.Spec.Resources)
	restart()
	expectSliceDenied(t, p, second, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, "cpu=2 asked, 2 of the 2 this tenant may hold already granted")
}

// TestConsumerSliceOutsideTenantNamespace: on the consumer, someone allowed to write
// ResourceSlices in a look-alike namespace (labelled as the provider's tenant namespace)
// gets no request sent to the provider and no Identity: only the recorded tenant
// namespace speaks for this cluster.
func TestConsumerSliceOutsideTenantNamespace(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	require.NoError(t, c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "look-alike", Labels: cluster.TenantNamespaceLabels(p.id)}}))
	mallory := principal(t, c, "slice-writer", "look-alike", rule("authentication.liqo.io", "resourceslices", "create", "get"))
	rs := localSlice(c, p, "stray", "", "1")
	rs.Namespace = "look-alike"
	require.NoError(t, mallory.Create(ctx, rs))
	waitEvent(t, c, "look-alike", "stray", "ResourceSliceNotInTenantNamespace")
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(rs), rs))
	assert.Empty(t, rs.Spec.CSR, "no CSR forged with the cluster key")
	var remote authv1beta1.ResourceSliceList
	require.NoError(t, p.client.List(ctx, &remote))
	assert.Empty(t, remote.Items, "nothing sent to the provider")
	assert.True(t, apierrorsIsNotFound(c.client.Get(ctx, client.ObjectKey{Namespace: "look-alike", Name: wire.SliceIdentityName("stray")}, &authv1beta1.Identity{})))
}

// TestConsumerSliceKubeconfigSwap: the consumer's slice controller keeps its client of the
// provider once it checked the control-plane kubeconfig. Whoever may update Secrets in the
// tenant namespace points that kubeconfig elsewhere: the identity controller puts the
// checked one back, the next slice reaches the provider, and nothing is ever sent to the
// swapped address (which would surface as a ProviderUnreachable Warning: nothing listens
// there). The slice controller checks a kubeconfig again whenever it changes.
func TestConsumerSliceKubeconfigSwap(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	first := localSlice(c, p, "first", "", "1")
	require.NoError(t, c.client.Create(ctx, first))
	waitSliceDecided(t, c, first)
	require.True(t, first.Status.AuthParams.HasCertificate(), "the first slice went through the checked client")

	tn := wire.TenantNamespaceName(p.id)
	mallory := principal(t, c, "secret-writer", tn, rule("", "secrets", "get", "update"))
	var s corev1.Secret
	key := client.ObjectKey{Namespace: tn, Name: wire.KubeconfigSecretName(wire.IdentityName(p.id))}
	require.NoError(t, mallory.Get(ctx, key, &s))
	genuine := string(s.Data[wire.KubeconfigField])
	swapped := strings.Replace(genuine, p.cp.URL, "https://127.0.0.1:1", 1)
	require.NotEqual(t, genuine, swapped, "the kubeconfig names the provider's URL")
	s.Data[wire.KubeconfigField] = []byte(swapped)
	require.NoError(t, mallory.Update(ctx, &s))

	second := localSlice(c, p, "second", "", "1")
	require.NoError(t, c.client.Create(ctx, second))
	waitSliceDecided(t, c, second)
	assert.True(t, second.Status.AuthParams.HasCertificate(), "the second slice reached the provider")
	require.NoError(t, c.client.Get(ctx, key, &s))
	assert.Equal(t, genuine, string(s.Data[wire.KubeconfigField]), "the checked kubeconfig is back")
	assert.False(t, hasEvent(t, c, tn, "second", "ProviderUnreachable"), "nothing was sent to the swapped address")
}
