package integration

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// attacker holds a consumer's key material without a cluster of its own: what matters on
// the provider is only what it is sent.
type attacker struct {
	id  string
	key crypto.Signer
}

func newAttacker(t testing.TB, id string) *attacker {
	t.Helper()
	key, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	return &attacker{id: id, key: key}
}

func (a *attacker) pubPEM(t testing.TB) []byte {
	b, err := authn.MarshalPublicKey(a.key.Public())
	require.NoError(t, err)
	return b
}

func (a *attacker) csr(t testing.TB) []byte {
	b, err := authn.ForgeCSR(a.key, a.id)
	require.NoError(t, err)
	return b
}

func (a *attacker) sign(t testing.TB, nonce string) []byte {
	b, err := authn.SignNonce(a.key, nonce)
	require.NoError(t, err)
	return b
}

// freshNonce ensures the tenant namespace of id on the provider and a new nonce in it.
func freshNonce(t testing.TB, p *site, id string) (tn, nonce string) {
	t.Helper()
	ctx := context.Background()
	tn = ensureTN(t, p.client, id)
	side := &handshake.Side{Scope: "remote", Client: p.client, Namespace: wire.DefaultLiqoNamespace}
	n, err := handshake.EnsureNonce(ctx, side, tn, id, time.Now())
	require.NoError(t, err)
	nonce = n.Value
	return tn, nonce
}

// honestTenant is the Tenant a well-behaved consumer would send.
func (a *attacker) honestTenant(t testing.TB, tn, nonce string) *authv1beta1.Tenant {
	return &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: a.id, Namespace: tn, Labels: map[string]string{wire.RemoteClusterIDLabel: a.id}},
		Spec:       authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(a.id), PublicKey: a.pubPEM(t), CSR: a.csr(t), Signature: a.sign(t, nonce)},
	}
}

// expectRefused waits for the Tenant to be refused with reason, then checks that a
// Warning Event says so and that nothing was signed or granted for the cluster.
func expectRefused(t *testing.T, p *site, tn *authv1beta1.Tenant, reason string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(tn)
	eventually(t, 15*time.Second, "the Tenant is refused with "+reason, func(ctx context.Context) (bool, error) {
		got := &authv1beta1.Tenant{}
		if err := p.client.Get(ctx, key, got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionAuthenticated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason, nil
	})
	eventually(t, 10*time.Second, "a Warning Event with reason "+reason, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := p.client.List(ctx, &evs, client.InNamespace(tn.Namespace)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == tn.Name && e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Note != "" {
				return true, nil
			}
		}
		return false, nil
	})
	assertNothingGranted(t, p, string(tn.Spec.ClusterID), tn.Namespace)
	got := &authv1beta1.Tenant{}
	require.NoError(t, p.client.Get(ctx, key, got))
	assert.Nil(t, got.Status.AuthParams, "no certificate is published")
	assert.Empty(t, got.Status.AcceptedKeyFingerprint)
}

// assertNothingGranted checks that no CSR exists for cluster id, no binding in any
// namespace names it, and SubjectAccessReviews deny every tenant permission.
func assertNothingGranted(t *testing.T, p *site, id, ns string) {
	t.Helper()
	ctx := context.Background()
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(ctx, &csrs))
	for _, c := range csrs.Items {
		assert.NotEqual(t, id, c.Labels[wire.RemoteClusterIDLabel], "no CSR may exist for %s", id)
	}
	bindings, err := revocation.BindingsNaming(ctx, p.client, id, nil)
	require.NoError(t, err)
	assert.Empty(t, bindings, "no binding anywhere may name %s", id)
	allowed, err := revocation.AllowedActions(ctx, p.client, id, []string{wire.UserGroup}, ns, access.ControlPlaneRules())
	require.NoError(t, err)
	assert.Empty(t, allowed)
}

// issueCert signs a client certificate for pub with ca, as a provider's signer would.
func issueCert(t testing.TB, ca *testenv.CA, pub crypto.PublicKey, cn string) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{wire.UserGroup}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
