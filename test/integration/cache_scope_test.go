package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
)

// TestManagerCacheKeepsOnlyWhatItOwns acts as a namespace editor (Secrets labelled for a
// remote cluster, in its own namespace), a CSR creator (requests labelled as this
// project's) and a tenant (a slice with big annotations): none of what they write is held
// whole in the manager's memory, while the handshake, which reads its own objects whole,
// still works. The manager is built as liqo-auth-manager builds it (CacheOptions, Setup).
func TestManagerCacheKeepsOnlyWhatItOwns(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "cache-provider"), "cl-provider")[0]
	ctx, cached := startScopedProvider(t, p)

	big := []byte(strings.Repeat("x", 256<<10))
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "editor-ns"}}))
	editor := principal(t, p, "namespace-editor", "editor-ns", rule("", "secrets", "create"))
	for _, name := range []string{"a", "b", wire.NonceSecretName, wire.KubeconfigSecretName("controlplane-x")} {
		require.NoError(t, editor.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "editor-ns", Name: name,
			Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-x", wire.NonceLabel: "true"}, Annotations: map[string]string{"note": string(big[:64<<10])}},
			Data: map[string][]byte{"payload": big, wire.NonceField: big}}))
	}
	csrCreator := principal(t, p, "csr-creator", "", rule("certificates.k8s.io", "certificatesigningrequests", "create"))
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "labelled-as-ours",
		Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: "x"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: bigCSR(t, 128<<10), SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}
	require.NoError(t, csrCreator.Create(ctx, csr))

	// A consumer's honest handshake, and a slice of its with big annotations.
	a := newAttacker(t, "cl-alice")
	ta := honestHandshake(t, p, a)
	rs := providerCopy(ta.Namespace, "annotated", a.id, sliceCSR(t, a.key, authn.SliceUserName("annotated", a.id), a.id))
	rs.Annotations = map[string]string{"example.com/big": string(big[:200<<10])}
	require.NoError(t, userClient(t, p, ta.Status.AuthParams.SignedCRT, a.key).Create(ctx, rs))

	eventually(t, 20*time.Second, "the cache holds what was written", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		var c certificatesv1.CertificateSigningRequest
		var r authv1beta1.ResourceSlice
		return cached.Get(ctx, client.ObjectKey{Namespace: "editor-ns", Name: "b"}, &s) == nil &&
			cached.Get(ctx, client.ObjectKeyFromObject(csr), &c) == nil && cached.Get(ctx, client.ObjectKeyFromObject(rs), &r) == nil, nil
	})
	for _, name := range []string{"a", "b", wire.NonceSecretName, wire.KubeconfigSecretName("controlplane-x")} {
		var s corev1.Secret
		require.NoError(t, cached.Get(ctx, client.ObjectKey{Namespace: "editor-ns", Name: name}, &s))
		assert.Empty(t, s.Data, "Secret %s outside every tenant namespace is cached without its data", name)
		assert.True(t, authmanager.Stripped(&s))
		assert.NotContains(t, s.Annotations, "note")
	}
	var c certificatesv1.CertificateSigningRequest
	require.NoError(t, cached.Get(ctx, client.ObjectKeyFromObject(csr), &c))
	assert.Empty(t, c.Spec.Request, "a request the manager did not make is cached without its content")
	var r authv1beta1.ResourceSlice
	require.NoError(t, cached.Get(ctx, client.ObjectKeyFromObject(rs), &r))
	assert.Empty(t, r.Annotations, "a slice keeps only this project's annotations in the cache")

	// What the manager owns is cached whole: the nonce of the tenant namespace.
	var nonce corev1.Secret
	require.NoError(t, cached.Get(ctx, client.ObjectKey{Namespace: ta.Namespace, Name: wire.NonceSecretName}, &nonce))
	assert.NotEmpty(t, nonce.Data[wire.NonceField])
	eventually(t, 20*time.Second, "the slice is issued", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
		return err == nil && rs.Status.AuthParams.HasCertificate(), err
	})
	var live authv1beta1.ResourceSlice
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(rs), &live))
	assert.Contains(t, live.Annotations, "example.com/big", "what the cache leaves out stays on the server")
}

// bigCSR is a valid certificate request of about size bytes (a large extension).
func bigCSR(t *testing.T, size int) []byte {
	t.Helper()
	key, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "someone"},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1}, Value: make([]byte, size)}}}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// startScopedProvider runs, in this process, a provider's manager on p whose cache is
// scoped as liqo-auth-manager's (authmanager.CacheScope), until the test ends, and returns
// a context ended with the test and that cache, synced.
func startScopedProvider(t *testing.T, p *site) (context.Context, cache.Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scope := authmanager.NewCacheScope(wire.DefaultLiqoNamespace)
	mgr, err := ctrl.NewManager(p.cp.Config, ctrl.Options{Scheme: scheme.New(), Cache: authmanager.CacheOptions(wire.DefaultLiqoNamespace, scope, false),
		Controller: authmanager.ControllerConfig(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, authmanager.Setup(ctx, mgr, authmanager.Options{Role: authmanager.Provider, Scope: scope,
		Tenant: issuing.Options{APIServer: p.cp.URL, CA: p.cp.CA.CertPEM}}))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // the manager stops with the context: its error says only that
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))
	return ctx, mgr.GetCache()
}
