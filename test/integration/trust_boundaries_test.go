package integration

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestPeeringUserCannotUndoTheAdministrator acts as a peering user, the weakest principal
// that may write its Tenant and its nonce: it cannot smuggle anything but a nonce into the
// provider, and it can neither patch back, nor delete and re-handshake its way out of, a
// drain the provider's administrator decided.
func TestPeeringUserCannotUndoTheAdministrator(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	peer := newClient(t, restConfigFromKubeconfig(t, []byte(out)))
	tn := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: tn, Name: c.id}

	t.Run("its nonce is only a nonce", func(t *testing.T) {
		nonceLabels := func() map[string]string {
			return map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: c.id}
		}
		for name, s := range map[string]*corev1.Secret{
			"a service-account token": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels(),
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken},
			"another type": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels()}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}},
			"a service-account annotation": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels(),
				Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}},
			"other data": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels()},
				Data: map[string][]byte{wire.NonceField: []byte("x"), "token": []byte("smuggled")}},
			"another cluster's label": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName,
				Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-someone-else"}}},
			"a finalizer": {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels(), Finalizers: []string{"example.com/keep"}}},
			"immutable":   {ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName, Labels: nonceLabels()}, Immutable: new(true)},
		} {
			err := peer.Create(ctx, s)
			require.Error(t, err, name)
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "%s: %v", name, err)
		}
		var s corev1.Secret
		assert.True(t, apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s)), "nothing was created")
	})

	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	consumerCreds := newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
	canList := func() error { return consumerCreds.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(tn)) }
	require.NoError(t, canList())

	t.Run("a patch of the Tenant does not undo a drain", func(t *testing.T) {
		_, errOut := mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		assert.Contains(t, errOut, "revoked: verified")
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var got authv1beta1.Tenant
			if err := peer.Get(ctx, key, &got); err != nil {
				return err
			}
			got.Spec.TenantCondition = authv1beta1.TenantConditionActive
			return peer.Update(ctx, &got)
		}), "the peering user may write its Tenant")
		waitAccess(t, p, key, false, authv1beta1.ReasonAccessRevoked)
		var got authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, key, &got))
		assert.Equal(t, authv1beta1.TenantConditionActive, got.Spec.TenantCondition, "the spec says Active")
		assert.Equal(t, authv1beta1.TenantConditionDrained, got.Status.TenantCondition, "the administrator's record says Drained")
		assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(tn)))
		assert.True(t, apierrors.IsForbidden(canList()))
	})

	t.Run("a new handshake does not reset a drain", func(t *testing.T) {
		require.NoError(t, peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(tn, c.id)}))
		eventually(t, 15*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, key, &authv1beta1.Tenant{})), nil
		})
		_, _, err := runCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "drained")
		assert.Contains(t, err.Error(), "liqoctl uncordon tenant "+c.id)

		// The handshake by hand, as the peering user, past liqoctl's early refusal: the
		// provider accepts the key and grants nothing.
		side := &handshake.Side{Scope: "remote", Client: peer, Namespace: wire.DefaultLiqoNamespace}
		n, err := handshake.EnsureNonce(ctx, side, tn, c.id, time.Now())
		require.NoError(t, err)
		consumerKey, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
		require.NoError(t, err)
		sig, err := authn.SignNonce(consumerKey, n.Value)
		require.NoError(t, err)
		tenant, err := handshake.ForgeTenant(c.id, consumerKey, sig, tn, "")
		require.NoError(t, err)
		require.NoError(t, peer.Create(ctx, tenant))
		waitTenantCondition(t, p, key, authv1beta1.ConditionAuthenticated, metav1.ConditionTrue, authv1beta1.ReasonHandshakeAccepted)
		waitTenantCondition(t, p, key, authv1beta1.ConditionCertificateIssued, metav1.ConditionFalse, authv1beta1.ReasonDrainedNoCertificate)
		waitAccess(t, p, key, false, authv1beta1.ReasonAccessRevoked)
		var got authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, key, &got))
		assert.Nil(t, got.Status.AuthParams, "no certificate for a drained cluster")
		assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(tn)))
	})

	t.Run("uncordon gives access back", func(t *testing.T) {
		mustCLI(t, "uncordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		waitAccess(t, p, key, true, authv1beta1.ReasonAccessGranted)
		mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
		user := newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
		require.NoError(t, user.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(tn)))
	})
}

// TestStatusWriterCannotHijackTheFirstHandshake acts as a principal that may write
// tenants/status on the provider (another operator, or Liqo's roles): it publishes, in an
// accepted Tenant, its own CA, API server and a certificate for the consumer's key. The
// consumer's first handshake with that provider must not pin that CA nor write a
// kubeconfig for that server.
func TestStatusWriterCannotHijackTheFirstHandshake(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	key := client.ObjectKey{Namespace: pTN, Name: c.id}
	writer := principal(t, p, "status-writer", pTN, rule("authentication.liqo.io", "tenants", "get"), rule("authentication.liqo.io", "tenants/status", "get", "update", "patch"))

	evil, err := testenv.NewCA("evil")
	require.NoError(t, err)
	consumerKey, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	forged := issueCert(t, evil, consumerKey.Public(), c.id)
	forgedCert, err := authn.ParseCertificate(forged)
	require.NoError(t, err)
	const evilServer = "https://127.0.0.1:9"
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var got authv1beta1.Tenant
		if getErr := writer.Get(ctx, key, &got); getErr != nil {
			return getErr
		}
		got.Status.AuthParams = &authv1beta1.AuthParams{APIServer: evilServer, CA: evil.CertPEM, SignedCRT: forged}
		got.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: forgedCert.SerialNumber.Text(16),
			NotBefore: &metav1.Time{Time: forgedCert.NotBefore}, NotAfter: &metav1.Time{Time: forgedCert.NotAfter}}
		return writer.Status().Update(ctx, &got)
	}))
	var tampered authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, key, &tampered))
	require.True(t, meta.IsStatusConditionTrue(tampered.Status.Conditions, authv1beta1.ConditionReady), "the forged status looks accepted")

	// The consumer forgets the provider, as a cluster meeting it for the first time.
	require.NoError(t, c.client.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metaOf(cTN, wire.IdentityName(p.id))}))
	require.NoError(t, cluster.UpdateTenantRecord(ctx, c.client, c.client, wire.DefaultLiqoNamespace, p.id, false, func(r *cluster.TenantRecord) error {
		r.CAFingerprint = ""
		return nil
	}))

	_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, "did not", "the tampered status is named")
	evilFP, err := authn.CAFingerprint(evil.CertPEM)
	require.NoError(t, err)
	realFP, err := authn.CAFingerprint(p.cp.CA.CertPEM)
	require.NoError(t, err)
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.Equal(t, realFP, rec.CAFingerprint, "the provider's own CA is pinned, not %s", evilFP)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	assert.Equal(t, p.cp.URL, id.Spec.AuthParams.APIServer)
	assert.NotEqual(t, string(forged), string(id.Spec.AuthParams.SignedCRT), "not the forged certificate")
	info, err := authn.ReadKubeconfig(kubeconfigOf(t, c, p))
	require.NoError(t, err)
	assert.Equal(t, p.cp.URL, info.Server, "the kubeconfig points at the provider, not at "+evilServer)
	user := newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
	require.NoError(t, user.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(pTN)))
}

// TestSliceUsersAndClusterIDsNeverMeet: a slice <rs> of consumer C is user
// <rs>-<hash of C>, a string any consumer may take as its cluster ID. Acting as consumers
// holding only their own key and control-plane certificate, neither order of the two
// gets one identity the other's grants; and a negative slice never makes room under a limit.
func TestSliceUsersAndClusterIDsNeverMeet(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "slice-clash-provider"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	alice := newAttacker(t, "cl-alice")
	ta := honestHandshake(t, p, alice)
	asAlice := userClient(t, p, ta.Status.AuthParams.SignedCRT, alice.key)

	t.Run("a slice named after an existing consumer is denied", func(t *testing.T) {
		gpu := newAttacker(t, authn.SliceUserName("gpu", alice.id))
		honestHandshake(t, p, gpu)
		rs := providerCopy(ta.Namespace, "gpu", alice.id, sliceCSR(t, alice.key, gpu.id, alice.id))
		require.NoError(t, asAlice.Create(ctx, rs))
		expectSliceDenied(t, p, rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, "cluster ID of a consumer")
	})

	t.Run("a consumer named after an existing slice is refused", func(t *testing.T) {
		rs := providerCopy(ta.Namespace, "tpu", alice.id, sliceCSR(t, alice.key, authn.SliceUserName("tpu", alice.id), alice.id))
		require.NoError(t, asAlice.Create(ctx, rs))
		eventually(t, 20*time.Second, "Alice's slice tpu is issued", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
			return err == nil && rs.Status.AuthParams.HasCertificate(), err
		})
		tpu := newAttacker(t, authn.SliceUserName("tpu", alice.id))
		tn, nonce := freshNonce(t, p, tpu.id)
		tenant := tpu.honestTenant(t, tn, nonce)
		require.NoError(t, p.client.Create(ctx, tenant))
		key := client.ObjectKeyFromObject(tenant)
		msg := waitTenantCondition(t, p, key, authv1beta1.ConditionAuthenticated, metav1.ConditionFalse, authv1beta1.ReasonClusterIDIsSliceUser)
		assert.Contains(t, msg, "ResourceSlice "+ta.Namespace+"/tpu")
		waitEvent(t, p, tn, tpu.id, authv1beta1.ReasonClusterIDIsSliceUser)
		assertNoCSRApproved(t, p, tpu.id)
		assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(tn)), "nothing granted to that cluster ID")
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs))
		ok, why := sliceAccepted(rs)
		assert.True(t, ok, "the slice that came first keeps its name: %s", why)
	})

	t.Run("a slice name too long for a label value is refused", func(t *testing.T) {
		long := strings.Repeat("s", 60)
		rs := providerCopy(ta.Namespace, long, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(long, alice.id), alice.id))
		err := asAlice.Create(ctx, rs)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "at most 50 characters")
		_, _, err = runCLI(t, "create", "resourceslice", long, "--remote-cluster-id", "cl-provider", "--cpu", "1")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "at most 50")
	})

	t.Run("a negative slice is refused", func(t *testing.T) {
		rs := providerCopy(ta.Namespace, "negative", alice.id, sliceCSR(t, alice.key, authn.SliceUserName("negative", alice.id), alice.id))
		rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-4")}
		err := asAlice.Create(ctx, rs)
		require.Error(t, err, "the tenant's own identity may write slices, not negative ones")
		assert.Contains(t, err.Error(), "may not be negative")

		// Liqo's chart installs the CRD without that rule: the provider denies it itself.
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: "resourceslices.authentication.liqo.io"}, &crd))
		for i := range crd.Spec.Versions {
			res := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["resources"]
			res.XValidations = nil
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["resources"] = res
		}
		require.NoError(t, p.client.Update(ctx, &crd))
		eventually(t, 10*time.Second, "the schema without the rule is served", func(ctx context.Context) (bool, error) {
			err := asAlice.Create(ctx, rs)
			return err == nil, client.IgnoreAlreadyExists(err)
		})
		expectSliceDenied(t, p, rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, "no negative quantity")
	})
}

// TestRevocationProofTrustsTheIdentity acts as a Secret writer in the consumer's tenant
// namespace: it points the kubeconfig Secret at a server that refuses every request (401).
// unauthenticate with a peering user proves the revocation with the consumer's own
// certificate; it must ask the provider the Identity recorded, with the pinned CA, and so
// find the grant left behind, not take the impostor's 401 for a revocation.
func TestRevocationProofTrustsTheIdentity(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)

	// A grant of the consumer's user that unauthenticate does not know of.
	grantLeftBehind(t, p, c.id)

	impostor := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
	}))
	t.Cleanup(impostor.Close)
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "secret-writer", cTN, rule("", "secrets", "get", "update"))
	var s corev1.Secret
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(wire.IdentityName(p.id))}, &s))
	kc, err := clientcmd.Load(s.Data[wire.KubeconfigField])
	require.NoError(t, err)
	for _, cl := range kc.Clusters {
		cl.Server = impostor.URL
		cl.CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: impostor.Certificate().Raw})
	}
	s.Data[wire.KubeconfigField], err = clientcmd.Write(*kc)
	require.NoError(t, err)
	require.NoError(t, writer.Update(ctx, &s))

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	require.Error(t, err, "the grant left behind is found:\n%s", errOut)
	assert.ErrorIs(t, err, handshake.ErrAccessNotRevoked)
	assert.Contains(t, err.Error(), "resourceslices")
	assert.NotContains(t, errOut, "Access revoked: verified")
}

// TestTenantNamespaceDesignatedByItsCreator: a namespace made with the labels of a tenant
// namespace by another tool (Liqo's liqoctl) becomes one only when the API server recorded
// that its creator may make tenant records. Acting as a namespace creator: its namespace
// is stamped with its name, which it cannot forge or change, and is not designated.
// Acting as an administrator: it is, and the manager binds itself there.
func TestTenantNamespaceDesignatedByItsCreator(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "designation-provider"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	creator := principal(t, p, "namespace-creator", "", rule("", "namespaces", "create", "get", "update", "patch"))

	// The creator annotation is the API server's: written over on a labelled namespace,
	// refused on any other.
	forged := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-forged", Labels: cluster.TenantNamespaceLabels("cl-forged"),
		Annotations: map[string]string{wire.CreatedByAnnotation: "kubernetes-admin"}}}
	require.NoError(t, creator.Create(ctx, forged))
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(forged), forged))
	assert.Equal(t, "namespace-creator", forged.Annotations[wire.CreatedByAnnotation])
	err := creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled-forged",
		Annotations: map[string]string{wire.CreatedByAnnotation: "kubernetes-admin"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "written by the API server")

	mine := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-mallory", Labels: cluster.TenantNamespaceLabels("cl-mallory")}}
	require.NoError(t, creator.Create(ctx, mine))
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(mine), mine))
	creatorOf, ok, err := cluster.NamespaceCreator(mine)
	require.True(t, ok)
	require.NoError(t, err)
	assert.Equal(t, "namespace-creator", creatorOf.User)
	mine.Annotations[wire.CreatedByAnnotation] = "kubernetes-admin"
	err = creator.Update(ctx, mine)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not change")
	waitEvent(t, p, metav1.NamespaceDefault, mine.Name, "TenantNamespaceNotDesignated")
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, "cl-mallory")
	require.NoError(t, err)
	assert.Nil(t, rec, "a namespace creator makes no tenant namespace")
	ok, _, err = cluster.VerifyTenantNamespace(ctx, p.client, wire.DefaultLiqoNamespace, mine.Name, "cl-mallory")
	require.NoError(t, err)
	assert.False(t, ok)

	// The administrator (as Liqo's liqoctl runs) creates one: it is designated.
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-liqo-consumer", Labels: cluster.TenantNamespaceLabels("cl-liqo-consumer")}}
	require.NoError(t, p.client.Create(ctx, theirs))
	eventually(t, 20*time.Second, "the administrator's namespace is designated", func(ctx context.Context) (bool, error) {
		ok, _, err := cluster.VerifyTenantNamespace(ctx, p.client, wire.DefaultLiqoNamespace, theirs.Name, "cl-liqo-consumer")
		return ok, err
	})
	// The record names the namespace first, then the manager binds itself there.
	eventually(t, 20*time.Second, "the manager bound itself there", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKey{Namespace: theirs.Name, Name: wire.ManagerName}, &rbacv1.RoleBinding{})
		return err == nil, client.IgnoreNotFound(err)
	})
	// A nonce Secret there is filled: the controllers treat it as a tenant namespace.
	require.NoError(t, p.client.Create(ctx, secret(theirs.Name, wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-liqo-consumer"}, nil)))
	eventually(t, 20*time.Second, "the nonce is filled", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := p.client.Get(ctx, client.ObjectKey{Namespace: theirs.Name, Name: wire.NonceSecretName}, &s)
		return err == nil && len(s.Data[wire.NonceField]) > 0, err
	})
}

// TestDesignationReadsTheCreatorLosslessly acts as a namespace creator whose identity
// provider sends a group holding a comma ("dev,system:masters", which OIDC allows): the
// creator record keeps it one group, and the review asks about exactly that creator, with
// its UID and extra, so the namespace is not designated.
func TestDesignationReadsTheCreatorLosslessly(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "designation-lossless"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	const user = "oidc:dev"
	groups := []string{"dev,system:masters", "team=a;b%2C"}
	extra := map[string][]string{"scopes.example.com": {"ns:create", "x,y"}}
	principal(t, p, user, "", rule("", "namespaces", "create", "get"))
	cfg := rest.CopyConfig(p.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, UID: "uid-42", Groups: groups, Extra: extra}
	creator := newClient(t, cfg)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-comma", Labels: cluster.TenantNamespaceLabels("cl-comma")}}
	require.NoError(t, creator.Create(ctx, ns))
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	got, ok, err := cluster.NamespaceCreator(ns)
	require.True(t, ok)
	require.NoError(t, err, "annotations %v", ns.Annotations)
	assert.Equal(t, user, got.User)
	assert.Equal(t, "uid-42", got.UID)
	assert.Subset(t, got.Groups, groups, "each group kept whole")
	assert.NotContains(t, got.Groups, "system:masters")
	assert.Equal(t, extra["scopes.example.com"], got.Extra["scopes.example.com"])

	waitEvent(t, p, metav1.NamespaceDefault, ns.Name, "TenantNamespaceNotDesignated")
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, "cl-comma")
	require.NoError(t, err)
	assert.Nil(t, rec, "a group named dev,system:masters is not system:masters")
	var binding rbacv1.RoleBinding
	assert.True(t, apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: wire.ManagerName}, &binding)),
		"the manager did not bind itself there")
}
