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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestResourceSliceFollowsAKeyRotation: a consumer peered with a provider holds a slice
// identity; it stages a key, the provider moves the consumer's control plane to it (played
// here as the provider's own controllers will: the Tenant's spec and seal for the new key,
// a key-bound control-plane certificate), and the consumer switches to it. The slice then
// gets a key-bound certificate for the new key, bound as its key group; its identity works
// with it, and the slice identity's OLD certificate, used by the slice identity itself, is
// refused its own slice.
func TestResourceSliceFollowsAKeyRotation(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	const name = "slice-rot"
	user := authn.SliceUserName(name, c.id)
	pTN := wire.TenantNamespaceName(c.id)
	oldKC, newKC, next := rotatedSlice(t, c, p, name)
	group, err := authn.KeyGroup(user, next.Public())
	require.NoError(t, err)
	info, err := authn.ReadKubeconfig(newKC)
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	assert.Equal(t, user, cert.Subject.CommonName)
	assert.Equal(t, group, authn.CertificateKeyGroup(cert), "the new certificate is key-bound")
	held, err := authn.ParsePrivateKey(info.KeyPEM)
	require.NoError(t, err)
	assert.True(t, authn.PublicKeysEqual(held.Public(), next.Public()), "the kubeconfig holds the new key")

	var rb rbacv1.RoleBinding
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.SliceAccessName(name)}, &rb))
	assert.Equal(t, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}, rb.Subjects, "the slice is bound as its key group")

	// The slice identity, with its new certificate, reads its own slice; with its old one,
	// it is refused.
	newUser, oldUser := newClient(t, restConfigFromKubeconfig(t, newKC)), newClient(t, restConfigFromKubeconfig(t, oldKC))
	require.NoError(t, newUser.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &authv1beta1.ResourceSlice{}))
	err = oldUser.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &authv1beta1.ResourceSlice{})
	require.True(t, apierrors.IsForbidden(err), "the old slice certificate reads its slice: %v", err)
	assert.False(t, canI(t, oldKC, "get", "authentication.liqo.io", "resourceslices", pTN, name), "the old slice certificate authorizes nothing")
}

// rotatedSlice has slice name of c accepted by p, checks that its identity reads it, then
// rotates c's key (the provider's side played by moveControlPlane) until the slice's
// Identity holds a certificate for the new key: it returns the slice identity's kubeconfig
// before and after, and the new key.
func rotatedSlice(t *testing.T, c, p *site, name string) (oldKC, newKC []byte, next crypto.Signer) {
	t.Helper()
	ctx := context.Background()
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	rs := localSlice(c, p, name, "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	waitSliceDecided(t, c, rs)
	oldKC = sliceKubeconfig(t, c, p, name)
	require.True(t, canI(t, oldKC, "get", "authentication.liqo.io", "resourceslices", pTN, name), "the slice identity reads its own slice")

	ks, err := cluster.StageNextKey(ctx, c.client, wire.DefaultLiqoNamespace, authn.Ed25519)
	require.NoError(t, err)
	next = ks.Next
	moveControlPlane(t, c, p, next)

	ks, err = cluster.SwitchToNextKey(ctx, c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	require.True(t, authn.PublicKeysEqual(ks.Current.Public(), next.Public()))

	// The consumer learns that its slice is denied (its CSR is for the old key, the Tenant's
	// accepted key is the new one) or rechecks it, and forges a key-bound CSR for the new key.
	eventually(t, 3*time.Minute, "the slice identity holds a certificate for the new key", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if getErr := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(name)}, &id); getErr != nil {
			return false, client.IgnoreNotFound(getErr)
		}
		cert, parseErr := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
		if parseErr != nil {
			return false, parseErr
		}
		if !authn.PublicKeysEqual(cert.PublicKey, next.Public()) || !meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady) ||
			id.Status.Certificate == nil || id.Status.Certificate.SerialNumber != cert.SerialNumber.Text(16) {
			return false, nil
		}
		newKC = sliceKubeconfig(t, c, p, name)
		return true, nil
	})
	return oldKC, newKC, next
}

// moveControlPlane plays the provider's side of a consumer's key rotation, which the
// provider's own controllers carry out (steps 3 and 5 of docs' rotation): the consumer's
// Tenant accepts the new key (spec and seal, as the provider's administrator), and the
// consumer's control-plane Identity gets a key-bound certificate of the provider's CA for
// it, which the identity controller turns into a kubeconfig with the new key.
func moveControlPlane(t *testing.T, c, p *site, next crypto.Signer) {
	t.Helper()
	ctx := context.Background()
	pub, err := authn.MarshalPublicKey(next.Public())
	require.NoError(t, err)
	csr, err := authn.ForgeKeyBoundCSRFor(next, c.id, wire.UserGroup)
	require.NoError(t, err)
	fp, err := authn.Fingerprint(next.Public())
	require.NoError(t, err)
	providerKey, err := cluster.GetClusterKey(ctx, p.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}
	eventually(t, 30*time.Second, "the Tenant accepts the new key", func(ctx context.Context) (bool, error) {
		var tn authv1beta1.Tenant
		if getErr := p.client.Get(ctx, key, &tn); getErr != nil {
			return false, getErr
		}
		if string(tn.Spec.PublicKey) != string(pub) {
			tn.Spec.PublicKey, tn.Spec.CSR = pub, csr
			return false, p.client.Update(ctx, &tn)
		}
		if tn.Status.AcceptedKeyFingerprint == fp {
			return true, nil
		}
		seal, sealErr := authn.SealAcceptance(providerKey, authn.Acceptance{TenantUID: string(tn.UID), ClusterID: c.id, KeyFingerprint: fp, CSRDigest: authn.CSRDigest(csr)})
		if sealErr != nil {
			return false, sealErr
		}
		tn.Status.AcceptedKeyFingerprint, tn.Status.AcceptedCSRDigest, tn.Status.AcceptanceSeal = fp, authn.CSRDigest(csr), seal
		return false, p.client.Status().Update(ctx, &tn)
	})

	group, err := authn.KeyGroup(c.id, next.Public())
	require.NoError(t, err)
	ca := p.cp.CA
	now := time.Now()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: c.id, Organization: []string{wire.UserGroup, group}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca.Cert, next.Public(), ca.Key)
	require.NoError(t, err)
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	idKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}
	eventually(t, 30*time.Second, "the control-plane kubeconfig holds the new key", func(ctx context.Context) (bool, error) {
		var id authv1beta1.Identity
		if err := c.client.Get(ctx, idKey, &id); err != nil {
			return false, err
		}
		if string(id.Spec.AuthParams.SignedCRT) != string(crt) {
			id.Spec.AuthParams.SignedCRT = crt
			return false, c.client.Update(ctx, &id)
		}
		info, err := authn.ReadKubeconfig(kubeconfigOf(t, c, p))
		if err != nil {
			return false, err
		}
		held, err := authn.ParsePrivateKey(info.KeyPEM)
		return err == nil && authn.PublicKeysEqual(held.Public(), next.Public()), err
	})
}
