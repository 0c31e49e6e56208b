package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

const (
	testLiqoNS    = "liqo"
	testSelf      = "cl-consumer"
	testProvider  = "cl-provider"
	testRemoteNS  = "liqo-tenant-cl-consumer"
	testAPIServer = "https://provider.example:6443"
)

// must is v, or a panic: the fixture's crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ca is a certificate authority of the provider's API server.
type ca struct {
	pem  []byte
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

func newCA(now time.Time) *ca {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key))
	return &ca{pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: must(x509.ParseCertificate(der)), key: key}
}

// leaf is a client certificate of pub for user cn, issued by a, valid until notAfter.
func (a *ca) leaf(pub crypto.PublicKey, cn string, serial int64, notAfter time.Time) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{wire.UserGroup}},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// fixture is a consumer (testSelf) holding the tenant namespace of a provider
// (testProvider) and a certificate the provider issued for its key.
type fixture struct {
	t    *testing.T
	now  time.Time
	key  crypto.Signer
	ns   string
	ca   *ca
	cert []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), key: must(authn.GenerateKey(authn.Ed25519)),
		ns: "liqo-tenant-" + testProvider}
	f.ca = newCA(f.now)
	f.cert = f.ca.leaf(f.key.Public(), testSelf, 0xabc, f.now.Add(23*time.Hour))
	return f
}

// identity is the control-plane Identity of the provider, as the protocol places it.
func (f *fixture) identity() *authv1beta1.Identity {
	return &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName(testProvider), Namespace: f.ns, UID: "identity-uid-1", Generation: 1,
			Labels: map[string]string{wire.RemoteClusterIDLabel: testProvider}},
		Spec: authv1beta1.IdentitySpec{ClusterID: testProvider, Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To(testRemoteNS),
			AuthParams: authv1beta1.AuthParams{APIServer: testAPIServer, CA: f.ca.pem, SignedCRT: f.cert}},
	}
}

// world is a Reconciler on a fake consumer cluster and the writes it made there.
type world struct {
	*fixture
	c        client.WithWatch
	r        *Reconciler
	recorder *events.FakeRecorder
	// writes counts the writes of the Reconciler, by verb and kind ("update Identity/status").
	writes controllertest.Writes
}

// newWorld makes a consumer holding the provider's tenant namespace, its record (pinning
// pin as the provider's CA, none if empty) and objs.
func (f *fixture) newWorld(pin string, objs ...client.Object) *world {
	w := &world{fixture: f, recorder: events.NewFakeRecorder(100)}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, UID: "ns-uid-1", Labels: cluster.TenantNamespaceLabels(testProvider)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "liqo-ns-uid"}})
	w.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Identity{}).WithObjects(objs...).
		WithInterceptorFuncs(w.funcs()).Build()
	if err := cluster.UpdateTenantRecord(context.Background(), w.c, w.c, testLiqoNS, testProvider, true, func(r *cluster.TenantRecord) error {
		r.Namespace, r.NamespaceUID, r.CAFingerprint = f.ns, "ns-uid-1", pin
		if pin != "" {
			r.ProxyURL = ptr.To("") // as a handshake pins them: together
		}
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	w.r = &Reconciler{Client: w.c, Placement: placement.Placement{Cache: w.c, Live: w.c, LiqoNamespace: testLiqoNS},
		Recorder: w.recorder, ClusterID: testSelf, Keys: cluster.FixedKeys{Current: f.key}, Now: func() time.Time { return f.now }}
	w.writes.Start()
	return w
}

// funcs counts every write.
func (w *world) funcs() interceptor.Funcs {
	return controllertest.Counting(w.writes.Note)
}

// reconcile runs one Reconcile of the Identity key and returns it as saved, with the
// writes made and the Events recorded.
func (w *world) reconcile(key types.NamespacedName) (ctrl.Result, *authv1beta1.Identity, map[string]int, []string) {
	w.t.Helper()
	w.writes.Take()
	id := &authv1beta1.Identity{}
	res, found, err := controllertest.Reconcile(w.t, w.r, w.c, key, id)
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	if !found {
		w.t.Fatalf("Identity %s is gone", key)
	}
	writes := w.writes.Take()
	return res, id, writes, controllertest.Events(w.recorder)
}

// secret reads the kubeconfig Secret of the Identity name, nil if there is none.
func (w *world) secret(ns, name string) *corev1.Secret {
	w.t.Helper()
	s := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: wire.KubeconfigSecretName(name)}, s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		w.t.Fatal(err)
	}
	return s
}

// record reads the provider's tenant record.
func (w *world) record() *cluster.TenantRecord {
	return must(cluster.GetTenantRecord(context.Background(), w.c, testLiqoNS, testProvider))
}
