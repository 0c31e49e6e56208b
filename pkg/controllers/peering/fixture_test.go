package peering

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// The consumer (testSelf, this cluster) and the provider (testProvider) its Peering
// testPeering reaches with the peering user in Secret testSecret.
const (
	testLiqoNS   = "liqo"
	testSelf     = "cl-consumer"
	testProvider = "cl-provider"
	testServer   = "https://provider.example:6443"
	testPeering  = "to-provider"
	testUID      = types.UID("peering-uid-1")
	testSecret   = "provider-bootstrap"
	testTenantNS = "liqo-tenant-" + testProvider
)

// testNow is the fixed clock of every test.
var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// must is v, or a panic: the fixture's crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ca is the provider API server's Kubernetes CA.
type ca struct {
	pem  []byte
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

func newCA() *ca {
	pub, key := must2(ed25519.GenerateKey(rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "provider-ca"}, NotBefore: testNow.Add(-24 * time.Hour),
		NotAfter: testNow.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key))
	return &ca{pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: must(x509.ParseCertificate(der)), key: key}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// credential is a bootstrap kubeconfig the provider's CA issued: user, in groups orgs,
// with certificate serial, valid until notAfter.
type credential struct {
	kubeconfig []byte
	certPEM    []byte
	user       string
	serial     string
	notAfter   time.Time
}

// forge issues a client certificate for a new key and forges its kubeconfig (the way the
// provider's liqoctl generate peering-user does), for the provider's API server.
func (a *ca) forge(user string, orgs []string, serial int64, notAfter time.Time) *credential {
	key := must(authn.GenerateKey(authn.Ed25519))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: user, Organization: orgs},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key))
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kc := must(authn.ForgeKubeconfig(authn.KubeconfigParams{ClusterName: testProvider, User: user, Server: testServer, CA: a.pem,
		CertPEM: certPEM, Key: key}, notAfter.Add(-time.Hour)))
	return &credential{kubeconfig: kc, certPEM: certPEM, user: user, serial: big.NewInt(serial).Text(16), notAfter: notAfter}
}

// peeringUser is a peering user the provider generated for consumer, valid for a day.
func (a *ca) peeringUser(consumer string) *credential {
	return a.forge(wire.PeeringUserName(consumer, "x7k2q"), nil, 0xb007, testNow.Add(24*time.Hour))
}

// peering is the Peering of the Liqo namespace, its finalizer set, changed by mutate.
func peering(mutate func(*authv1beta1.Peering)) *authv1beta1.Peering {
	p := &authv1beta1.Peering{
		ObjectMeta: metav1.ObjectMeta{Namespace: testLiqoNS, Name: testPeering, UID: testUID, Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       authv1beta1.PeeringSpec{BootstrapSecretRef: corev1.LocalObjectReference{Name: testSecret}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// bootstrapSecret is Secret testSecret holding kubeconfig under KubeconfigKey.
func bootstrapSecret(kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testLiqoNS, Name: testSecret},
		Data: map[string][]byte{KubeconfigKey: kubeconfig}}
}

// readyIdentity is the consumer's control-plane Identity of testProvider, ready with a
// certificate valid until notAfter.
func readyIdentity(notAfter time.Time) *authv1beta1.Identity {
	return &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Namespace: testTenantNS, Name: wire.IdentityName(testProvider), Generation: 1},
		Spec:       authv1beta1.IdentitySpec{ClusterID: testProvider, Type: authv1beta1.ControlPlaneIdentityType},
		Status: authv1beta1.IdentityStatus{
			Certificate: &authv1beta1.CertificateInfo{SerialNumber: "c0ffee", NotAfter: &metav1.Time{Time: notAfter}},
			Conditions: []metav1.Condition{{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "ok",
				LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour))}},
		},
	}
}
