package consumerslice

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// must is v, or a panic: the tests' crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// testCA is a provider's API server CA.
type testCA struct {
	pem  []byte
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

func newTestCA() *testCA {
	pub, key := must2(ed25519.GenerateKey(rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key))
	return &testCA{pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: must(x509.ParseCertificate(der)), key: key}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// leaf is a client certificate of pub for user cn and organizations orgs.
func (a *testCA) leaf(pub crypto.PublicKey, cn string, orgs ...string) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// controlPlane is the control-plane Identity with providerID, its certificate cert.
func controlPlane(cert []byte) *authv1beta1.Identity {
	return &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: wire.IdentityName(providerID),
		Labels: map[string]string{wire.RemoteClusterIDLabel: providerID}},
		Spec: authv1beta1.IdentitySpec{ClusterID: providerID, Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To(remoteNS),
			AuthParams: authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: []byte("ca"), SignedCRT: cert}}}
}

// TestSliceCSRFollowsTheCurrentKey: a slice's CSR is for the key the control-plane
// certificate with its provider holds (the current one when there is none); once that
// moved, a slice whose CSR is for the previous key gets a CSR for the new one: key-bound (O = its cluster ID and
// its key group) when the control-plane identity with the provider holds a key-bound
// certificate, in Liqo's form otherwise; a CSR already for the current key is kept.
func TestSliceCSRFollowsTheCurrentKey(t *testing.T) {
	ca := newTestCA()
	old, current := must(authn.GenerateKey(authn.Ed25519)), must(authn.GenerateKey(authn.Ed25519))
	user := authn.SliceUserName(sliceName, consumerID)
	liqoCP := ca.leaf(old.Public(), consumerID, wire.UserGroup)
	keyBoundCP := ca.leaf(current.Public(), consumerID, wire.UserGroup, must(authn.KeyGroup(consumerID, current.Public())))
	currentCSR := must(authn.ForgeCSRFor(current, user, consumerID))
	for _, tc := range []struct {
		name string
		// csr is the slice's CSR before; cp the control-plane Identity (nil: none).
		csr []byte
		cp  *authv1beta1.Identity
		// keyBound: the new CSR is key-bound; kept: the CSR is not replaced.
		keyBound, kept bool
	}{
		{name: "no control-plane identity: Liqo's form", csr: must(authn.ForgeCSRFor(old, user, consumerID))},
		// The provider has not moved yet: its Tenant still accepts the old key, so the
		// slice keeps its grant with a CSR for that key.
		{name: "control plane still on the old key: kept", csr: must(authn.ForgeCSRFor(old, user, consumerID)), cp: controlPlane(liqoCP), kept: true},
		{name: "control plane in Liqo's form on the current key: Liqo's form", csr: must(authn.ForgeCSRFor(old, user, consumerID)), cp: controlPlane(ca.leaf(current.Public(), consumerID, wire.UserGroup))},
		{name: "key-bound control plane: key-bound", csr: must(authn.ForgeCSRFor(old, user, consumerID)), cp: controlPlane(keyBoundCP), keyBound: true},
		{name: "key-bound CSR of the old key: key-bound", csr: must(authn.ForgeKeyBoundCSRFor(old, user, consumerID)), cp: controlPlane(keyBoundCP), keyBound: true},
		{name: "CSR for the current key: kept", csr: currentCSR, cp: controlPlane(keyBoundCP), kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := request(sliceName, 0)
			rs.Finalizers = []string{wire.ConsumerSliceFinalizer}
			rs.Spec.ConsumerClusterID, rs.Spec.ProviderClusterID = ptr.To(authv1beta1.ClusterID(consumerID)), ptr.To(authv1beta1.ClusterID(providerID))
			rs.Spec.CSR = tc.csr
			objs := []client.Object{rs}
			if tc.cp != nil {
				objs = append(objs, tc.cp)
			}
			e := setup(t, true, objs...)
			e.r.Keys = cluster.FixedKeys{Current: current, Previous: old}
			if _, _, err := e.reconcile(t, sliceName); err != nil {
				t.Fatal(err)
			}
			got := &authv1beta1.ResourceSlice{}
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), got); err != nil {
				t.Fatal(err)
			}
			if tc.kept {
				if string(got.Spec.CSR) != string(tc.csr) || e.n.patch != 0 {
					t.Fatalf("a CSR for the current key was replaced (%d patches)", e.n.patch)
				}
				return
			}
			csr, err := authn.ValidateCSRFor(got.Spec.CSR, current.Public(), user, consumerID)
			if err != nil {
				t.Fatalf("the slice's CSR is not one for the current key: %v", err)
			}
			wantOrgs := []string{consumerID}
			if tc.keyBound {
				wantOrgs = append(wantOrgs, must(authn.KeyGroup(user, current.Public())))
			}
			if got := slices.Sorted(slices.Values(csr.Subject.Organization)); !slices.Equal(got, slices.Sorted(slices.Values(wantOrgs))) {
				t.Fatalf("CSR organizations %q, want %q", got, wantOrgs)
			}
		})
	}
}

// TestProviderReachedWithTheKeyOfTheKubeconfig: the control-plane kubeconfig is used with
// the key of the set it holds (the previous one until the provider moved it), and one
// holding a key of no set is refused.
func TestProviderReachedWithTheKeyOfTheKubeconfig(t *testing.T) {
	ca := newTestCA()
	old, current, next, stranger := must(authn.GenerateKey(authn.Ed25519)), must(authn.GenerateKey(authn.Ed25519)),
		must(authn.GenerateKey(authn.Ed25519)), must(authn.GenerateKey(authn.Ed25519))
	ks := cluster.KeySet{Current: current, Next: next, Previous: old}
	for _, tc := range []struct {
		name      string
		held      crypto.Signer
		wantError bool
	}{
		{name: "previous key", held: old},
		{name: "current key", held: current},
		{name: "staged key", held: next},
		{name: "a key of no set", held: stranger, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := ca.leaf(tc.held.Public(), consumerID, wire.UserGroup)
			kubeconfig := must(authn.ForgeKubeconfig(authn.KubeconfigParams{ClusterName: providerID, User: consumerID, Server: "https://provider.example:6443",
				CA: ca.pem, CertPEM: cert, Key: tc.held, Namespace: remoteNS}, now))
			if got := kubeconfigKey(ks, kubeconfig); tc.wantError == authn.PublicKeysEqual(got.Public(), tc.held.Public()) {
				t.Fatalf("the kubeconfig of %s is used with another key (or a stranger's with its own)", tc.name)
			}
		})
	}
}
