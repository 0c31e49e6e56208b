package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

func badCSR(t testing.TB, a *attacker, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, a.key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestAdversarialTenants sends the provider every kind of dishonest Tenant. Each must be
// refused with its Event and condition, with nothing signed and nothing granted; then an
// honest consumer still authenticates.
func TestAdversarialTenants(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "adv-provider", "adv-consumer")
	sites := installSites(t, cps, "cl-provider", "cl-honest")
	p, honest := sites[0], sites[1]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	subject := func(id string) pkix.Name {
		return pkix.Name{CommonName: id, Organization: []string{wire.UserGroup}}
	}
	u, _ := url.Parse("spiffe://evil/x")

	cases := []struct {
		name   string
		reason string
		mutate func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, nonce string)
	}{
		{"signature by a different key", string(authn.ReasonSignatureInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, nonce string) {
			tn.Spec.Signature = newAttacker(t, "x").sign(t, nonce)
		}},
		{"signature over another nonce", string(authn.ReasonSignatureInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			other, _ := authn.NewNonce()
			tn.Spec.Signature = a.sign(t, other)
		}},
		{"CSR for another key", string(authn.ReasonCSRKeyMismatch), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			other := newAttacker(t, a.id)
			tn.Spec.CSR = other.csr(t)
		}},
		{"CN of another cluster", string(authn.ReasonCSRCommonNameMismatch), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: subject("cl-honest")})
		}},
		{"extra organization", string(authn.ReasonCSROrganizationMismatch), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: pkix.Name{CommonName: a.id, Organization: []string{wire.UserGroup, "system:masters"}}})
		}},
		{"other organization", string(authn.ReasonCSROrganizationMismatch), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: pkix.Name{CommonName: a.id, Organization: []string{"system:masters"}}})
		}},
		{"extra subject attribute", string(authn.ReasonCSRExtraSubject), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			s := subject(a.id)
			s.OrganizationalUnit = []string{"admins"}
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: s})
		}},
		{"DNS SAN", string(authn.ReasonCSRSubjectAltNames), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: subject(a.id), DNSNames: []string{"kubernetes.default"}})
		}},
		{"IP SAN", string(authn.ReasonCSRSubjectAltNames), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: subject(a.id), IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}})
		}},
		{"email SAN", string(authn.ReasonCSRSubjectAltNames), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: subject(a.id), EmailAddresses: []string{"root@evil"}})
		}},
		{"URI SAN", string(authn.ReasonCSRSubjectAltNames), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = badCSR(t, a, x509.CertificateRequest{Subject: subject(a.id), URIs: []*url.URL{u}})
		}},
		{"multiple PEM blocks", string(authn.ReasonCSRMultipleBlocks), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = append(a.csr(t), a.csr(t)...)
		}},
		{"trailing bytes", string(authn.ReasonCSRTrailingData), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = append(a.csr(t), []byte("\x00\x01trailing")...)
		}},
		{"broken self-signature", string(authn.ReasonCSRSelfSignatureInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			block, _ := pem.Decode(a.csr(t))
			block.Bytes[len(block.Bytes)-1] ^= 0xff
			tn.Spec.CSR = pem.EncodeToMemory(block)
		}},
		{"oversized CSR", string(authn.ReasonCSRTooLarge), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = append(a.csr(t), make([]byte, authn.MaxCSRSize)...)
		}},
		{"oversized signature", string(authn.ReasonSignatureInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.Signature = make([]byte, 4096)
		}},
		{"oversized public key", string(authn.ReasonPublicKeyInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.PublicKey = make([]byte, authn.MaxPublicKeySize+1)
		}},
		{"garbage CSR", string(authn.ReasonCSRNotPEM), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = []byte("this is not PEM at all")
		}},
		{"garbage DER in a CSR block", string(authn.ReasonCSRMalformed), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.CSR = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x82, 0xff}})
		}},
		{"garbage public key", string(authn.ReasonPublicKeyInvalid), func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Spec.PublicKey = []byte("-----BEGIN PUBLIC KEY-----\nZ2FyYmFnZQ==\n-----END PUBLIC KEY-----\n")
		}},
		{"name mismatch", "TenantNameMismatch", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) { tn.Name = "not-" + a.id }},
		{"label mismatch", "TenantLabelMismatch", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Labels[wire.RemoteClusterIDLabel] = "cl-honest"
		}},
		{"placed in another tenant's namespace", "TenantNotInTenantNamespace", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			tn.Namespace = ensureTN(t, p.client, "cl-victim")
		}},
		{"placed outside any tenant namespace", "TenantNotInTenantNamespace", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) { tn.Namespace = "default" }},
		{"nonce past its TTL", "NonceExpired", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			var s corev1.Secret
			require.NoError(t, p.client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: wire.NonceSecretName}, &s))
			s.Annotations[wire.NonceIssuedAtAnnotation] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
			require.NoError(t, p.client.Update(context.Background(), &s))
		}},
		{"no nonce", "NonceMissing", func(t *testing.T, a *attacker, tn *authv1beta1.Tenant, _ string) {
			require.NoError(t, p.client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Namespace, Name: wire.NonceSecretName}}))
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAttacker(t, fmt.Sprintf("cl-attacker-%d", i))
			ns, nonce := freshNonce(t, p, a.id)
			tn := a.honestTenant(t, ns, nonce)
			tc.mutate(t, a, tn, nonce)
			require.NoError(t, p.client.Create(ctx, tn))
			expectRefused(t, p, tn, tc.reason)
		})
	}

	t.Run("replayed Tenant after its nonce was consumed", func(t *testing.T) {
		a := newAttacker(t, "cl-replay")
		ns, nonce := freshNonce(t, p, a.id)
		tn := a.honestTenant(t, ns, nonce)
		replay := tn.DeepCopy()
		require.NoError(t, p.client.Create(ctx, tn))
		eventually(t, 20*time.Second, "the honest Tenant is accepted", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)
			return meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady), err
		})
		require.NoError(t, p.client.Delete(ctx, tn))
		eventually(t, 10*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)), nil
		})
		// The consumed nonce stays (Liqo's consumer presents it again after Liqo's
		// unauthenticate). Another key signing it, in a re-created Tenant, is refused.
		// Acting as the weakest principal that could try it: one allowed to write Tenants
		// in that tenant namespace (as a peering user of that consumer is).
		writer := principal(t, p, "tenant-writer-replay", ns, rule("authentication.liqo.io", "tenants", "create", "get", "delete"))
		mallory := newAttacker(t, a.id)
		stolen := mallory.honestTenant(t, ns, nonce)
		require.NoError(t, writer.Create(ctx, stolen))
		expectRefused(t, p, stolen, string(authv1beta1.ReasonNonceConsumed))
		require.NoError(t, writer.Delete(ctx, stolen))
		eventually(t, 10*time.Second, "the refused Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(stolen), stolen)), nil
		})
		// The consumer's own handshake, re-applied, certifies its own key again: what any
		// new handshake of that consumer would do.
		require.NoError(t, p.client.Create(ctx, replay))
		waitTenantCondition(t, p, client.ObjectKeyFromObject(replay), authv1beta1.ConditionReady, metav1.ConditionTrue, "Ready")
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(replay), replay))
		_, err := authn.VerifyCertificate(replay.Status.AuthParams.SignedCRT, replay.Status.AuthParams.CA, a.key.Public(), a.id, time.Now())
		require.NoError(t, err, "a certificate for the consumer's own key, and nobody else's")
	})

	t.Run("changing the key of an accepted Tenant", func(t *testing.T) {
		a := newAttacker(t, "cl-switch")
		ns, nonce := freshNonce(t, p, a.id)
		tn := a.honestTenant(t, ns, nonce)
		require.NoError(t, p.client.Create(ctx, tn))
		eventually(t, 20*time.Second, "accepted", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)
			return meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady), err
		})
		serial := tn.Status.Certificate.SerialNumber
		thief := newAttacker(t, a.id)
		tn.Spec.PublicKey, tn.Spec.CSR = thief.pubPEM(t), thief.csr(t)
		require.NoError(t, p.client.Update(ctx, tn))
		eventually(t, 15*time.Second, "the change needs a new handshake", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)
			c := meta.FindStatusCondition(tn.Status.Conditions, authv1beta1.ConditionAuthenticated)
			return c != nil && c.Reason == "HandshakeChanged", err
		})
		require.Equal(t, serial, tn.Status.Certificate.SerialNumber, "no certificate is issued for the new key")
	})

	t.Run("the provider still serves honest consumers", func(t *testing.T) {
		startControllers(t, honest, authmanager.Consumer)
		kubeconfig := objectHandshake(t, p, honest)
		assertTenantAccess(t, p, honest, kubeconfig)
	})
}
