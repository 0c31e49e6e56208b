package integration

// Attack 69 (helper-35 on 6ebf645): every proof of a revocation made with one of this
// cluster's own certificates (a slice's deletion, unauthenticate with a peering user,
// leave) takes the certificate from an Identity (or a slice's status) after
// Side.credential checked it is valid now, of the user it proves for, for a key this
// cluster holds, and that the AuthParams' CA is the one pinned for the provider. Nothing
// checks that the certificate was issued by that CA (authn.VerifyCertificate does, the
// proofs do not call it). A certificate anyone signs with a CA of their own, for this
// cluster's public key (public: it is in every certificate of this cluster) and the right
// common name, passes every check; the provider's API server then answers each
// SelfSubjectAccessReview with 401 Unauthorized, which selfAllowedIn reads as "the
// certificate may no longer do anything": the revocation is "verified".

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// a69Forge re-issues certificate certPEM (its subject, its public key: this cluster's)
// from a CA the attacker makes up, valid for a day: no key of this cluster's is needed.
func a69Forge(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	orig, err := authn.ParseCertificate(certPEM)
	require.NoError(t, err)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "attacker-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: orig.Subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, orig.PublicKey, caKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// a69SetCertificate writes crt into Identity key as writer, and checks it stays there a
// moment (no controller writes it back).
func a69SetCertificate(t *testing.T, writer client.Client, key client.ObjectKey, crt []byte) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if err := writer.Get(ctx, key, &id); err != nil {
			return err
		}
		id.Spec.AuthParams.SignedCRT = crt
		return writer.Update(ctx, &id)
	}))
	time.Sleep(time.Second)
	var id authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, key, &id))
	require.Equal(t, string(crt), string(id.Spec.AuthParams.SignedCRT), "setup: the forged certificate stays in Identity %s", key)
}

// TestAttack69IdentityWriterForgesTheSlicesCertificate acts as an Identity writer of the
// consumer's tenant namespace (identities get, update, delete), the principal attack 68
// used. It deletes the control-plane Identity (the slice controller can no longer reach
// the provider: the local slice goes, its copy and grant stay, and no controller writes
// the slice's Identity again), and replaces the certificate of the slice's Identity with
// one it signed itself: the slice's user, this cluster's public key, the pinned CA left in
// the Identity's AuthParams. liqoctl delete resourceslice takes it (every check of
// Side.credential passes), the provider answers 401 to each review, and the command says
// "Access of the slice's identity revoked: verified" and exits 0 while the slice identity
// still reads its copy on the provider. What must hold: as in attacks 67/68, the command
// fails or the access is gone.
func TestAttack69IdentityWriterForgesTheSlicesCertificate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kc := a67Slice(t, c, p, "slice-a69")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update", "delete"))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(p.id)}}))
	key := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName("slice-a69")}
	var sl authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, key, &sl))
	a69SetCertificate(t, writer, key, a69Forge(t, sl.Spec.AuthParams.SignedCRT))

	_, errOut, err := runCLI(t, "delete", "resourceslice", "slice-a69", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, kc, "slice-a69", errOut, err)
}

// TestAttack69IdentityWriterForgesTheControlPlaneCertificate acts as an Identity writer of
// the consumer's tenant namespace (identities get, update). The consumer peered with a
// peering user; the provider's administrator granted the consumer's user more than
// unauthenticate knows of (attack 68's setup). The writer replaces the control-plane
// Identity's certificate with one it signed itself for user <consumer ID> and this
// cluster's public key. unauthenticate with the peering user (which may ask no
// SubjectAccessReviews) proves the revocation with "the consumer's own certificate": the
// forged one, which the provider answers 401, read as "may do nothing". What must hold:
// the grant left is found, never "Access revoked: verified".
func TestAttack69IdentityWriterForgesTheControlPlaneCertificate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)

	grantLeftBehind(t, p, c.id)

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	key := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}
	var cp authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, key, &cp))
	a69SetCertificate(t, writer, key, a69Forge(t, cp.Spec.AuthParams.SignedCRT))

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	t.Logf("unauthenticate: err=%v\n%s", err, errOut)
	var crb rbacv1.ClusterRoleBinding
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: "left-behind"}, &crb), "the grant is still there")
	assert.Error(t, err, "unauthenticate succeeded while user %q keeps ClusterRoleBinding left-behind on the provider", c.id)
	assert.NotContains(t, errOut, "Access revoked: verified", "the revocation was 'verified' with a certificate the provider does not accept (401 read as 'may do nothing')")
}

// a69Relabel acts as a ResourceSlice writer of the consumer's tenant namespace (resourceslices
// get, update) and relabels slice name as TestRelabelledSliceIsNotForgotten does: another
// provider in its remote-cluster-id label, no replication-requested label. The consumer's
// slice controller then no longer handles it (IsRequest): its copy on the provider, with
// its grant, stays.
func a69Relabel(t *testing.T, c, p *site, name string) {
	t.Helper()
	ctx := context.Background()
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "slice-writer", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: name}, &rs); err != nil {
			return err
		}
		rs.Labels[wire.RemoteClusterIDLabel] = "cl-other"
		delete(rs.Labels, wire.ReplicationRequestedLabel)
		return writer.Update(ctx, &rs)
	}))
}

// TestAttack69SliceWriterRelabelsASliceBeforeUnauthenticate: the rule "every slice in a
// peer's tenant namespace counts as asked of that peer, whatever its labels say"
// (docs/security.md, TestRelabelledSliceIsNotForgotten) holds for unauthenticate
// --remote-cluster-id only; unauthenticate with both kubeconfigs lists the slices by their
// labels (handshake.SlicesFor). A slice writer relabels an accepted slice; the
// administrator runs unauthenticate --delete-resourceslices with the provider's
// administrator kubeconfig. What must hold: the command never succeeds while the slice
// identity still reads its copy on the provider (it refuses the slice without
// --delete-resourceslices, deletes it with).
func TestAttack69SliceWriterRelabelsASliceBeforeUnauthenticate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := a67Slice(t, c, p, "slice-a69e")
	a69Relabel(t, c, p, "slice-a69e")

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices")
	t.Logf("unauthenticate: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a69e") {
		assert.Error(t, err, "unauthenticate --delete-resourceslices succeeded while the identity of the relabelled slice still reads its copy on the provider")
	}
}

// TestAttack69SliceWriterRelabelsASliceBeforeLeave: the same relabelling before
// unauthenticate --leave --delete-resourceslices (handshake.Leave lists the slices by
// their labels too). What must hold: as above.
func TestAttack69SliceWriterRelabelsASliceBeforeLeave(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := a67Slice(t, c, p, "slice-a69f")
	a69Relabel(t, c, p, "slice-a69f")

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--delete-resourceslices")
	t.Logf("leave: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a69f") {
		assert.Error(t, err, "leave succeeded while the identity of the relabelled slice still reads its copy on the provider")
	}
}
