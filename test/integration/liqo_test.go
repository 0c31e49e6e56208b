package integration

import (
	"context"
	"crypto"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

func liqoFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "liqo", name))
	require.NoError(t, err)
	return data
}

// liqoObjects are objects Liqo's controllers write, with the fields of Liqo's schema
// this project does not use itself (slice classes, AWS credentials).
func liqoObjects(t *testing.T, c client.Client, tn string) (*authv1beta1.ResourceSlice, *authv1beta1.Identity) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn, Labels: cluster.TenantNamespaceLabels("cl-liqo-peer")}})))
	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "slice"},
		Spec: authv1beta1.ResourceSliceSpec{Class: "default"}}
	require.NoError(t, c.Create(ctx, rs))
	rs.Status.StorageClasses = []authv1beta1.StorageType{{StorageClassName: "standard", Default: true}}
	rs.Status.IngressClasses = []authv1beta1.IngressType{{IngressClassName: "nginx"}}
	rs.Status.LoadBalancerClasses = []authv1beta1.LoadBalancerType{{LoadBalancerClassName: "metallb"}}
	require.NoError(t, c.Status().Update(ctx, rs))
	id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "controlplane-cl-liqo-peer"},
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-liqo-peer", Type: authv1beta1.ControlPlaneIdentityType,
			AuthParams: authv1beta1.AuthParams{APIServer: "https://eks.example.com", AwsConfig: &authv1beta1.AwsConfig{
				AwsUserArn: "arn:aws:iam::1:user/liqo", AwsAccessKeyID: "AKIA", AwsSecretAccessKey: "secret", AwsRegion: "eu-west-1", AwsClusterName: "eks"}}}}
	require.NoError(t, c.Create(ctx, id))
	return rs, id
}

func assertLiqoFieldsKept(t *testing.T, c client.Client, rs *authv1beta1.ResourceSlice, id *authv1beta1.Identity) {
	t.Helper()
	ctx := context.Background()
	var gotRS authv1beta1.ResourceSlice
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(rs), &gotRS))
	assert.Equal(t, rs.Status.StorageClasses, gotRS.Status.StorageClasses)
	assert.Equal(t, rs.Status.IngressClasses, gotRS.Status.IngressClasses)
	assert.Equal(t, rs.Status.LoadBalancerClasses, gotRS.Status.LoadBalancerClasses)
	var gotID authv1beta1.Identity
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(id), &gotID))
	assert.Equal(t, id.Spec.AuthParams.AwsConfig, gotID.Spec.AuthParams.AwsConfig)
}

// TestInstallBesideLiqo installs this project on a cluster where Liqo's chart is
// installed, then uninstalls it: Liqo's CRDs, roles, identity and objects are left exactly
// as they were, and a manager that would fight Liqo's controllers is refused.
func TestInstallBesideLiqo(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "liqo-installed")[0]
	c := newClient(t, cp.Config)
	ctx := context.Background()
	applyYAML(t, c, liqoFixture(t, "crds.yaml"))
	require.NoError(t, installer.WaitCRDsEstablished(ctx, c, liqoCRDNames...))
	applyYAML(t, c, liqoFixture(t, "controlplane.yaml"))
	rs, id := liqoObjects(t, c, "liqo-tenant-cl-liqo-peer")
	crdsBefore := map[string]string{}
	for _, name := range []string{"tenants", "identities", "resourceslices", "renews"} {
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name + ".authentication.liqo.io"}, &crd))
		crdsBefore[crd.Name] = crd.ResourceVersion
	}
	var roleBefore rbacv1.ClusterRole
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: wire.ControlPlaneRoleName}, &roleBefore))

	_, errOut := mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig)
	assert.Contains(t, errOut, `Kept CustomResourceDefinition tenants.authentication.liqo.io (managed by Helm release "liqo")`)
	assert.Contains(t, errOut, `Kept ClusterRole liqo-remote-controlplane (managed by Helm release "liqo")`)
	assert.Contains(t, errOut, `Cluster ID "cl-liqo" (kept`)
	for name, rv := range crdsBefore {
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, &crd))
		assert.Equal(t, rv, crd.ResourceVersion, "Liqo's CRD %s is untouched", name)
	}
	var role rbacv1.ClusterRole
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: wire.ControlPlaneRoleName}, &role))
	assert.Equal(t, roleBefore.ResourceVersion, role.ResourceVersion, "Liqo's role is untouched")
	assertLiqoFieldsKept(t, c, rs, id)

	_, _, err := runCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--with-manager", "--manager-image", "example.com/m:1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not deploying liqo-auth-manager: another installation (Liqo) manages the authentication.liqo.io CRDs")

	_, _, err = runCLI(t, "uninstall", "--kubeconfig", cp.Kubeconfig)
	require.Error(t, err, "Liqo's objects exist")
	assert.Contains(t, err.Error(), "ResourceSlice liqo-tenant-cl-liqo-peer/slice, which liqo-auth did not make")
	_, errOut = mustCLI(t, "uninstall", "--kubeconfig", cp.Kubeconfig, "--force", "--skip-confirm")
	assert.Contains(t, errOut, "Kept Identity liqo-tenant-cl-liqo-peer/controlplane-cl-liqo-peer, ResourceSlice liqo-tenant-cl-liqo-peer/slice: liqo-auth did not make them")
	for name, rv := range crdsBefore {
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, &crd), "uninstall kept Liqo's CRD %s", name)
		assert.Equal(t, rv, crd.ResourceVersion)
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: wire.ControlPlaneRoleName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: wire.ClusterWideRoleName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: wire.ClusterIDConfigMapName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo"}}} {
		assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), obj), "uninstall kept Liqo's %T %s", obj, obj.GetName())
	}
	assertLiqoFieldsKept(t, c, rs, id)
	var ours rbacv1.ClusterRole
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &ours)), "what only liqo-auth used is removed")
}

// TestLiqoObjectsSurviveThisSchema: with this project's CRDs installed, the fields of
// Liqo's schema this project does not use itself are kept by the API server.
func TestLiqoObjectsSurviveThisSchema(t *testing.T) {
	t.Parallel()
	s := installSites(t, testenv.New(t, "schema"), "cl-schema")[0]
	rs, id := liqoObjects(t, s.client, "liqo-tenant-cl-liqo-peer")
	assertLiqoFieldsKept(t, s.client, rs, id)
	renew := &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: "controlplane-cl-liqo-peer"},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: "cl-liqo-peer", IdentityType: authv1beta1.ControlPlaneIdentityType}}
	require.NoError(t, s.client.Create(context.Background(), renew), "Renew is served")
}

// fakeLiqoProvider plays Liqo's provider controllers on s, as they behave: a Tenant whose
// signature verifies over the nonce of its namespace gets its CSR signed through the CSR
// API and status.authParams and status.tenantNamespace written, with no condition.
func fakeLiqoProvider(t *testing.T, s *site) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var tenants authv1beta1.TenantList
			if err := s.client.List(ctx, &tenants); err == nil {
				for i := range tenants.Items {
					liqoIssue(ctx, t, s, &tenants.Items[i])
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

func liqoIssue(ctx context.Context, t *testing.T, s *site, tn *authv1beta1.Tenant) {
	if tn.Status.AuthParams != nil && len(tn.Status.AuthParams.SignedCRT) > 0 {
		return
	}
	var nonce corev1.Secret
	if s.client.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: wire.NonceSecretName}, &nonce) != nil {
		return
	}
	pub, err := authn.ParsePublicKey(tn.Spec.PublicKey)
	if err != nil || authn.VerifyNonceSignature(pub, string(nonce.Data[wire.NonceField]), tn.Spec.Signature) != nil {
		return
	}
	cert := liqoSign(ctx, t, s, tn.Spec.CSR, 3600, map[string]string{wire.RemoteClusterIDLabel: string(tn.Spec.ClusterID)})
	if cert == nil {
		return
	}
	// Liqo grants the control-plane role in the tenant namespace and its virtual-kubelet
	// role cluster-wide to the consumer's group, and keeps the certificate it issued.
	id := string(tn.Spec.ClusterID)
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Namespace, Name: wire.LiqoControlPlaneBindingName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: id}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ControlPlaneRoleName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.LiqoClusterWideBindingName(id)},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: id}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ClusterWideRoleName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Namespace, Name: wire.LiqoRemoteCertificateSecret,
			Labels: map[string]string{wire.RemoteClusterIDLabel: id}}, Data: map[string][]byte{"certificate": cert}},
	} {
		if err := s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Logf("fake Liqo: %v", err)
		}
	}
	tn.Status.TenantNamespace = tn.Namespace
	tn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: s.cp.Config.Host, CA: s.cp.Config.CAData, SignedCRT: cert}
	if err := s.client.Status().Update(ctx, tn); err != nil {
		t.Logf("fake Liqo: status: %v", err)
	}
}

// liqoSign has a CSR signed as Liqo's identity manager does: a CertificateSigningRequest
// for the client signer, approved, and its certificate read back (nil on failure).
func liqoSign(ctx context.Context, t *testing.T, s *site, request []byte, seconds int32, labels map[string]string) []byte {
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "liqo-identity-", Labels: labels},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To(seconds)}}
	if s.client.Create(ctx, csr) != nil {
		return nil
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "LiqoApproved"})
	if err := s.client.SubResource("approval").Update(ctx, csr); err != nil {
		t.Logf("fake Liqo: approving: %v", err)
		return nil
	}
	for ctx.Err() == nil && len(csr.Status.Certificate) == 0 {
		time.Sleep(50 * time.Millisecond)
		_ = s.client.Get(ctx, client.ObjectKeyFromObject(csr), csr)
	}
	return csr.Status.Certificate
}

// TestAuthenticateAgainstLiqoProvider: liqoctl authenticate detects Liqo's controllers on
// the provider, starts none of its own there, and completes on what Liqo writes.
func TestAuthenticateAgainstLiqoProvider(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	applyYAML(t, provider.client, []byte(liqoDeployment))
	fakeLiqoProvider(t, provider)

	// A namespace creator labels a namespace of its own as the consumer's tenant namespace.
	// Liqo's controllers trust labels: liqoctl refuses to choose, and sends nothing there.
	creator := principal(t, provider, "namespace-creator", "", rule("", "namespaces", "create", "get", "list"))
	lookAlike := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "aaa-look-alike", Labels: cluster.TenantNamespaceLabels(consumer.id)}}
	require.NoError(t, creator.Create(ctx, lookAlike))
	_, _, err := runCLI(t, pairArgs("authenticate", consumer, provider)...)
	require.Error(t, err)
	assert.ErrorIs(t, err, cluster.ErrAmbiguousTenantNamespace)
	assert.Contains(t, err.Error(), "aaa-look-alike")
	var inLookAlike authv1beta1.TenantList
	require.NoError(t, provider.client.List(ctx, &inLookAlike, client.InNamespace(lookAlike.Name)))
	assert.Empty(t, inLookAlike.Items, "no Tenant in the look-alike namespace")
	require.NoError(t, provider.client.Delete(ctx, lookAlike))
	eventually(t, 30*time.Second, "the look-alike namespace is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKeyFromObject(lookAlike), &corev1.Namespace{})), nil
	})

	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(remote) Liqo's controllers run in this cluster (Deployment liqo/liqo-controller-manager): acting as their client")
	assert.NotContains(t, errOut, "(remote) No liqo-auth-manager runs in this cluster")
	assert.Contains(t, errOut, "(local) Identity status is filled")

	var tn authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &tn))
	assert.Empty(t, tn.Status.Conditions, "only Liqo's (fake) controllers wrote the Tenant status")
	var id authv1beta1.Identity
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(provider.id), Name: wire.IdentityName(provider.id)}, &id))
	assert.True(t, meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady))

	_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "Already authenticated with cluster")

	// unauthenticate removes what Liqo granted and kept, and proves it, including the
	// cluster-wide binding of the consumer's group: one it does not know is reported.
	stray := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stray-" + consumer.id},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: consumer.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ClusterWideRoleName}}
	require.NoError(t, provider.client.Create(ctx, stray))
	_, _, err = runCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `named by ClusterRoleBinding "stray-`+consumer.id+`"`)
	require.NoError(t, provider.client.Delete(ctx, stray))
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(remote) Access revoked: verified")
	pTN := wire.TenantNamespaceName(consumer.id)
	for _, obj := range access.LiqoAccessObjects(pTN, consumer.id) {
		assert.True(t, apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)), "%T %s removed", obj, obj.GetName())
	}
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, provider.client.List(ctx, &csrs, client.MatchingLabels{wire.RemoteClusterIDLabel: consumer.id}))
	assert.Empty(t, csrs.Items, "Liqo's certificate requests removed")
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)

	// Told that the provider runs this project's controllers, it does not look.
	_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider, "--remote-controllers", "liqo-auth", "--dry-run")...)
	assert.NotContains(t, errOut, "Liqo's controllers run")
	_, _, err = runCLI(t, pairArgs("authenticate", consumer, provider, "--remote-controllers", "maybe")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--remote-controllers must be auto, liqo or liqo-auth, not "maybe"`)
}

const liqoDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: liqo-controller-manager
  namespace: liqo
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: controller-manager}
  template:
    metadata:
      labels: {app.kubernetes.io/name: controller-manager}
    spec:
      containers:
      - name: controller-manager
        image: ghcr.io/liqotech/liqo-controller-manager:v1.0.0
`

// TestLiqoConsumerRerunsAgainstThisProvider plays Liqo's liqoctl authenticate (a consumer
// that keeps its signed nonce and re-applies its Tenant) twice against this project's
// provider: the nonce stays, marked consumed, and the second run converges.
func TestLiqoConsumerRerunsAgainstThisProvider(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "provider-for-liqo"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	const consumerID = "cl-liqo-consumer"
	key, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	// The provider's administrator opens the tenant namespace (Liqo's liqoctl cannot make
	// this project's record).
	mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", consumerID)
	tnName := wire.TenantNamespaceName(consumerID)

	liqoRun := func() (*authv1beta1.Tenant, string) {
		var s corev1.Secret
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tnName, Name: wire.NonceSecretName}, &s), "Liqo expects the nonce to stay")
		nonce := string(s.Data[wire.NonceField])
		sig, signNonceErr := authn.SignNonce(key, nonce)
		require.NoError(t, signNonceErr)
		want, signNonceErr := handshake.ForgeTenant(consumerID, key, sig, tnName, "")
		require.NoError(t, signNonceErr)
		var tn authv1beta1.Tenant
		signNonceErr = p.client.Get(ctx, client.ObjectKeyFromObject(want), &tn)
		if apierrors.IsNotFound(signNonceErr) {
			require.NoError(t, p.client.Create(ctx, want))
			tn = *want
		} else {
			require.NoError(t, signNonceErr)
			tn.Spec = want.Spec
			require.NoError(t, p.client.Update(ctx, &tn))
		}
		// Liqo's consumer waits for a filled authParams, nothing else.
		eventually(t, 20*time.Second, "the provider fills authParams", func(ctx context.Context) (bool, error) {
			getErr := p.client.Get(ctx, client.ObjectKeyFromObject(&tn), &tn)
			return getErr == nil && tn.Status.AuthParams != nil && len(tn.Status.AuthParams.SignedCRT) > 0, getErr
		})
		_, signNonceErr = authn.VerifyCertificate(tn.Status.AuthParams.SignedCRT, tn.Status.AuthParams.CA, key.Public(), consumerID, time.Now())
		require.NoError(t, signNonceErr)
		return &tn, nonce
	}
	first, nonce1 := liqoRun()
	var s corev1.Secret
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tnName, Name: wire.NonceSecretName}, &s))
	requireNonceConsumed(t, p.client, consumerID, &s)

	second, nonce2 := liqoRun()
	assert.Equal(t, nonce1, nonce2)
	assert.Equal(t, first.Generation, second.Generation, "the re-run applied the very same Tenant")
	assert.Equal(t, first.Status.Certificate.SerialNumber, second.Status.Certificate.SerialNumber)
	time.Sleep(time.Second)
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(second), second))
	assert.True(t, meta.IsStatusConditionTrue(second.Status.Conditions, authv1beta1.ConditionReady), "still accepted after the re-run")

	// The same Tenant with another key, signed over the consumed nonce, is refused: the
	// nonce was consumed by the accepted key.
	other, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	sig, err := authn.SignNonce(other, nonce1)
	require.NoError(t, err)
	switched, err := handshake.ForgeTenant(consumerID, other, sig, tnName, "")
	require.NoError(t, err)
	// Whoever may patch the nonce Secret (a peering user may) makes it look freshly issued:
	// the Secret says nothing of its consumption, the record is what counts.
	secretWriter := principal(t, p, "nonce-writer", tnName, rule("", "secrets", "get", "update", "patch"))
	var ns corev1.Secret
	require.NoError(t, secretWriter.Get(ctx, client.ObjectKey{Namespace: tnName, Name: wire.NonceSecretName}, &ns))
	ns.Annotations[wire.NonceIssuedAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, secretWriter.Update(ctx, &ns))
	tenantWriter := tenantSpecWriter(t, p, tnName)
	require.NoError(t, tenantWriter.Get(ctx, client.ObjectKeyFromObject(second), second))
	second.Spec = switched.Spec
	require.NoError(t, tenantWriter.Update(ctx, second))
	msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(second), authv1beta1.ConditionAuthenticated, metav1.ConditionFalse, string(authv1beta1.ReasonHandshakeChanged))
	assert.Contains(t, msg, "was already used")

	// Deleting the Tenant (Liqo's unauthenticate does only that) keeps the nonce, consumed:
	// Liqo's consumer, which keeps its signed nonce, presents it again when it re-runs.
	require.NoError(t, p.client.Delete(ctx, second))
	eventually(t, 10*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(second), second)), nil
	})
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tnName, Name: wire.NonceSecretName}, &corev1.Secret{}), "the consumed nonce is kept")
	third, nonce3 := liqoRun()
	assert.Equal(t, nonce1, nonce3, "the re-run after the Tenant's deletion presents the same nonce")
	assert.True(t, meta.IsStatusConditionTrue(third.Status.Conditions, authv1beta1.ConditionReady), "and is accepted, for its own key")
}

// userClient is a client that authenticates with a client certificate and its key.
func userClient(t *testing.T, s *site, certPEM []byte, key crypto.Signer) client.WithWatch {
	t.Helper()
	keyPEM, err := authn.MarshalPrivateKey(key)
	require.NoError(t, err)
	cfg := rest.CopyConfig(s.cp.Config)
	cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password = "", "", "", ""
	cfg.CertFile, cfg.KeyFile = "", ""
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return newClient(t, cfg)
}

// TestRenewChannelOnThisProvider: a Liqo consumer keeps a Renew in its tenant namespace,
// written with its own certificate; this provider answers it with every renewed
// certificate of the accepted Tenant, and refuses a Renew for another key or outside the
// tenant namespace, signing nothing for it.
func TestRenewChannelOnThisProvider(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "renew-provider"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider, func(o *authmanager.Options) {
		o.Tenant.CertificateLifetime, o.Tenant.RenewBefore = 10*time.Minute, 594*time.Second
	})
	ctx := context.Background()
	a := newAttacker(t, "cl-liqo-renewer")
	accepted := honestHandshake(t, p, a)
	tenantClient := userClient(t, p, accepted.Status.AuthParams.SignedCRT, a.key)

	renewFor := func(key crypto.Signer) *authv1beta1.Renew {
		pub, err := authn.MarshalPublicKey(key.Public())
		require.NoError(t, err)
		csr, err := authn.ForgeCSR(key, a.id)
		require.NoError(t, err)
		return &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: accepted.Namespace, Name: wire.IdentityName(p.id),
			Labels: map[string]string{wire.ReplicationStatusLabel: "true", wire.ReplicationOriginLabel: a.id, wire.RemoteClusterIDLabel: a.id}},
			Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(a.id), IdentityType: authv1beta1.ControlPlaneIdentityType, PublicKey: pub, CSR: csr}}
	}
	rn := renewFor(a.key)
	require.NoError(t, tenantClient.Create(ctx, rn), "the control-plane identity may keep its Renew")
	seen := map[string]bool{}
	eventually(t, 60*time.Second, "the Renew carries two renewed certificates in turn", func(ctx context.Context) (bool, error) {
		if err := tenantClient.Get(ctx, client.ObjectKeyFromObject(rn), rn); err != nil {
			return false, err
		}
		if rn.Status.AuthParams != nil && len(rn.Status.AuthParams.SignedCRT) > 0 {
			cert, err := authn.VerifyCertificate(rn.Status.AuthParams.SignedCRT, rn.Status.AuthParams.CA, a.key.Public(), a.id, time.Now())
			require.NoError(t, err)
			seen[cert.SerialNumber.Text(16)] = true
		}
		return len(seen) >= 2, nil
	})

	// Another key, through the same channel: refused, and no CSR is made for it.
	other, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	require.NoError(t, tenantClient.Delete(ctx, rn))
	eventually(t, 10*time.Second, "the Renew is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(tenantClient.Get(ctx, client.ObjectKeyFromObject(rn), rn)), nil
	})
	forged := renewFor(other)
	require.NoError(t, tenantClient.Create(ctx, forged))
	waitEvent(t, p, forged.Namespace, forged.Name, authv1beta1.ReasonRenewKeyMismatch)
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(forged), forged))
	assert.Nil(t, forged.Status.AuthParams, "nothing answered for another key")

	// A Renew outside the tenant namespace, by someone who may write Renews there.
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Labels: cluster.TenantNamespaceLabels(a.id)}}))
	mallory := principal(t, p, "renew-writer", "elsewhere", rule("authentication.liqo.io", "renews", "create", "get"))
	stray := renewFor(a.key)
	stray.Namespace = "elsewhere"
	require.NoError(t, mallory.Create(ctx, stray))
	waitEvent(t, p, "elsewhere", stray.Name, authv1beta1.ReasonRenewMisplaced)
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(stray), stray))
	assert.Nil(t, stray.Status.AuthParams)
}

// TestRenewChannelFromThisConsumer: against a provider that does not let a tenant read its
// Tenant (Liqo's), this consumer's manager keeps a Renew there and picks up the renewed
// certificate the provider answers with.
func TestRenewChannelFromThisConsumer(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	applyYAML(t, provider.client, []byte(liqoDeployment))
	fakeLiqoProvider(t, provider)
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	tn := wire.TenantNamespaceName(consumer.id)
	// Liqo bound its control-plane role, which lets a tenant keep Renews, and no reader of
	// the Tenant.
	before := identitySerial(t, consumer, provider)
	startControllers(t, consumer, authmanager.Consumer, func(o *authmanager.Options) { o.WatchRenewals = true })

	rn := &authv1beta1.Renew{}
	key := client.ObjectKey{Namespace: tn, Name: wire.IdentityName(provider.id)}
	eventually(t, 30*time.Second, "the consumer keeps its Renew on the provider", func(ctx context.Context) (bool, error) {
		err := provider.client.Get(ctx, key, rn)
		return err == nil, client.IgnoreNotFound(err)
	})
	assert.Equal(t, authv1beta1.ClusterID(consumer.id), rn.Spec.ConsumerClusterID)
	assert.Equal(t, authv1beta1.ControlPlaneIdentityType, rn.Spec.IdentityType)
	// Liqo's provider answers the Renew with a renewed certificate.
	cert := liqoSign(ctx, t, provider, rn.Spec.CSR, 7200, nil)
	rn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: provider.cp.Config.Host, CA: provider.cp.Config.CAData, SignedCRT: cert}
	require.NoError(t, provider.client.Status().Update(ctx, rn))
	eventually(t, 30*time.Second, "the Identity holds the renewed certificate", func(context.Context) (bool, error) {
		return identitySerial(t, consumer, provider) != before, nil
	})
	assert.True(t, hasEvent(t, consumer, wire.TenantNamespaceName(provider.id), wire.IdentityName(provider.id), "CertificateRenewed"))
}

// fakeLiqoConsumer plays Liqo's consumer controllers on s, as they behave: the signed-nonce
// Secret gets its signature with the cluster key, and an Identity gets its kubeconfig
// Secret and status.kubeconfigSecretRef, nothing else.
func fakeLiqoConsumer(t *testing.T, s *site) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	key, err := cluster.GetClusterKey(ctx, s.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	wg.Go(func() {
		for ctx.Err() == nil {
			var secrets corev1.SecretList
			if s.client.List(ctx, &secrets, client.MatchingLabels{wire.SignedNonceLabel: "true"}) == nil {
				for i := range secrets.Items {
					sec := &secrets.Items[i]
					if len(sec.Data[wire.SignedNonceField]) > 0 {
						continue
					}
					if sig, err := authn.SignNonce(key, string(sec.Data[wire.NonceField])); err == nil {
						sec.Data[wire.SignedNonceField] = sig
						_ = s.client.Update(ctx, sec)
					}
				}
			}
			var ids authv1beta1.IdentityList
			if s.client.List(ctx, &ids) == nil {
				for i := range ids.Items {
					id := &ids.Items[i]
					if id.Status.KubeconfigSecretRef != nil {
						continue
					}
					kc, err := authn.ForgeKubeconfig(authn.KubeconfigParams{ClusterName: string(id.Spec.ClusterID), User: s.id, Server: id.Spec.AuthParams.APIServer,
						CA: id.Spec.AuthParams.CA, CertPEM: id.Spec.AuthParams.SignedCRT, Key: key, Namespace: ptr.Deref(id.Spec.Namespace, "")}, time.Now())
					if err != nil {
						t.Logf("fake Liqo consumer: %v", err)
						continue
					}
					name := "liqo-kubeconfig-" + id.Name
					sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: name}, Data: map[string][]byte{wire.KubeconfigField: kc}}
					if err := s.client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
						continue
					}
					id.Status.KubeconfigSecretRef = &corev1.LocalObjectReference{Name: name}
					_ = s.client.Status().Update(ctx, id)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// TestAuthenticateFromLiqoConsumer: liqoctl authenticate with a consumer that runs Liqo's
// controllers (and a provider running this project's) completes on what Liqo writes on
// the consumer, and re-running it changes nothing.
func TestAuthenticateFromLiqoConsumer(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	applyYAML(t, consumer.client, []byte(liqoDeployment))
	fakeLiqoConsumer(t, consumer)

	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(local) Liqo's controllers run in this cluster (Deployment liqo/liqo-controller-manager): acting as their client")
	assert.NotContains(t, errOut, "(local) No liqo-auth-manager runs in this cluster")
	assert.Contains(t, errOut, "(remote) No liqo-auth-manager runs in this cluster: its provider controllers run in-process")
	assert.NotContains(t, errOut, "log.SetLogger", "in-process controllers log through liqoctl's logger")
	assert.NotContains(t, errOut, "()", "no empty scope")
	assert.Contains(t, errOut, "(local) Identity status is filled")
	var id authv1beta1.Identity
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(provider.id), Name: wire.IdentityName(provider.id)}, &id))
	require.NotNil(t, id.Status.KubeconfigSecretRef)
	assert.Empty(t, id.Status.Conditions, "only Liqo's (fake) controllers wrote the Identity status")
	rec, err := cluster.GetTenantRecord(ctx, consumer.client, wire.DefaultLiqoNamespace, provider.id)
	require.NoError(t, err)
	assert.Nil(t, rec, "no record of this project's on a Liqo consumer")

	_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "Already authenticated with cluster")
}

// TestLiqoProviderSaysWhyItWaits: Liqo's controllers write no status conditions; one that
// will not complete a handshake says why only in a Warning Event on the Tenant (a
// certificate it keeps for an older CSR, for one). authenticate's timeout carries it,
// with the command that removes what Liqo kept.
func TestLiqoProviderSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	applyYAML(t, provider.client, []byte(liqoDeployment))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		warned := map[string]bool{}
		for ctx.Err() == nil {
			var tenants authv1beta1.TenantList
			if provider.client.List(ctx, &tenants) == nil {
				for _, tn := range tenants.Items {
					if warned[tn.Namespace] {
						continue
					}
					ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Namespace, GenerateName: tn.Name + "."},
						InvolvedObject: corev1.ObjectReference{Kind: "Tenant", APIVersion: authv1beta1.GroupVersion.String(), Namespace: tn.Namespace, Name: tn.Name, UID: tn.UID},
						Type:           corev1.EventTypeWarning, Reason: "AuthParamsFailed", LastTimestamp: metav1.Now(),
						Message: "the stored and the provided CSR for cluster " + tn.Name + " does not match"}
					warned[tn.Namespace] = provider.client.Create(ctx, ev) == nil
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	_, _, err := runCLI(t, pairArgs("authenticate", consumer, provider, "--timeout", "8s")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Liqo's controllers said, on the Tenant: AuthParamsFailed: the stored and the provided CSR for cluster cl-consumer does not match")
	assert.Contains(t, err.Error(), "kubectl delete secret -n liqo-tenant-cl-consumer liqo-remote-certificate")
}

// liqoCRDNames are the CRDs of authentication.liqo.io that Liqo's chart installs (the
// Peering is this project's only).
var liqoCRDNames = []string{"tenants.authentication.liqo.io", "identities.authentication.liqo.io", "resourceslices.authentication.liqo.io", "renews.authentication.liqo.io"}
