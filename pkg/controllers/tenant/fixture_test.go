package tenant

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

const (
	testLiqoNS    = "liqo"
	testAPIServer = "https://provider.example:6443"
	testLifetime  = 24 * time.Hour
)

// fixture is one consumer's handshake with a provider, made of real keys, nonce,
// signature, CSR and certificates, for a Reconciler on a fake client.
type fixture struct {
	t          *testing.T
	now        time.Time
	id, ns     string
	nsUID      types.UID
	clusterKey crypto.Signer
	fp         string
	nonce      string
	caPEM      []byte
	// cert is a certificate of the tenant's key the provider issued (certPEM); otherPEM
	// another one.
	cert              *x509.Certificate
	certPEM, otherPEM []byte
	// tenant is the Tenant as the consumer creates it: not accepted yet.
	tenant *authv1beta1.Tenant
}

// must is v, or a panic: the fixture's crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), id: "cl-consumer", nsUID: "ns-uid-1"}
	f.ns = "liqo-tenant-" + f.id
	f.clusterKey = must(authn.GenerateKey(authn.Ed25519))
	tenantKey := must(authn.GenerateKey(authn.Ed25519))
	f.fp = must(authn.Fingerprint(tenantKey.Public()))
	f.nonce = must(authn.NewNonce())
	caPub, caKey := must2(ed25519.GenerateKey(rand.Reader))
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: f.now.Add(-time.Hour),
		NotAfter: f.now.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER := must(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, caKey))
	f.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	leaf := func(serial int64) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: f.id, Organization: []string{wire.UserGroup}},
			NotBefore: f.now.Add(-time.Hour), NotAfter: f.now.Add(testLifetime - time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der := must(x509.CreateCertificate(rand.Reader, tmpl, must(x509.ParseCertificate(caDER)), tenantKey.Public(), caKey))
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	f.certPEM, f.otherPEM = leaf(0xabc), leaf(0xdef)
	f.cert = must(authn.ParseCertificate(f.certPEM))
	f.tenant = &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: f.id, Namespace: f.ns, UID: "tenant-uid-1", Generation: 1, Labels: map[string]string{wire.RemoteClusterIDLabel: f.id}},
		Spec: authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(f.id), PublicKey: must(authn.MarshalPublicKey(tenantKey.Public())),
			CSR: must(authn.ForgeCSR(tenantKey, f.id)), Signature: must(authn.SignNonce(tenantKey, f.nonce))},
	}
	return f
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// testCert is a certificate for the tests that need any.
func testCert(t *testing.T) *x509.Certificate { return newFixture(t).cert }

// accepted is the Tenant once this provider sealed its acceptance, with nothing published.
func (f *fixture) accepted() *authv1beta1.Tenant {
	t := f.tenant.DeepCopy()
	t.Finalizers = []string{wire.TenantFinalizer}
	t.Status.AcceptedKeyFingerprint, t.Status.AcceptedCSRDigest = f.fp, acceptance.CSRDigest(t.Spec.CSR)
	t.Status.AcceptanceSeal = must(authn.SealAcceptance(f.clusterKey, authn.Acceptance{TenantUID: string(t.UID), ClusterID: f.id,
		KeyFingerprint: f.fp, CSRDigest: t.Status.AcceptedCSRDigest}))
	t.Status.AcceptedAt = &metav1.Time{Time: f.now.Add(-time.Hour).Truncate(time.Second)}
	return t
}

// published is the accepted Tenant publishing cert, as this provider published it.
func (f *fixture) published() *authv1beta1.Tenant {
	t := f.accepted()
	t.Status.AuthParams = &authv1beta1.AuthParams{APIServer: testAPIServer, CA: f.caPEM, SignedCRT: f.certPEM}
	t.Status.Certificate = issuer.CertificateInfo(f.cert, 0)
	return t
}

// nonceSecret is the nonce the consumer signed, issued a minute ago.
func (f *fixture) nonceSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.NonceSecretName, Namespace: f.ns, UID: "nonce-uid-1",
		CreationTimestamp: metav1.NewTime(f.now.Add(-time.Minute)), Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: f.id}},
		Data: map[string][]byte{wire.NonceField: []byte(f.nonce)}}
}

// world is a Reconciler on a fake cluster and what it did there.
type world struct {
	*fixture
	c        client.WithWatch
	r        *Reconciler
	recorder *events.FakeRecorder
	// writes counts the writes of the Reconciler, by verb and kind ("update Tenant/status").
	writes controllertest.Writes
	// allowed answers the SubjectAccessReviews (nil: nothing is allowed).
	allowed func(*authorizationv1.SubjectAccessReview) bool
	// refuse, when set, fails a create or patch ("create", "patch") of obj with the error it
	// returns (nil: the write goes through).
	refuse func(verb string, obj client.Object) error
	// signs makes the approval of a CertificateSigningRequest answer at once with the
	// fixture's certificate, as a signer that is quick enough.
	signs bool
}

// newWorld makes a provider holding the tenant namespace and its record (changed by rec)
// and objs, and a Reconciler for it whose clock is f.now.
func (f *fixture) newWorld(rec func(*cluster.TenantRecord), objs ...client.Object) *world {
	w := &world{fixture: f, recorder: events.NewFakeRecorder(100)}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, UID: f.nsUID, Labels: cluster.TenantNamespaceLabels(f.id)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "liqo-ns-uid"}})
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Tenant{}).WithObjects(objs...).
		WithInterceptorFuncs(w.funcs())
	if err := cluster.IndexSliceUsers(context.Background(), controllertest.Indexer{B: b}); err != nil {
		f.t.Fatal(err)
	}
	if err := issuer.IndexByOwner(context.Background(), controllertest.Indexer{B: b}, wire.TenantAnnotation); err != nil {
		f.t.Fatal(err)
	}
	w.c = b.Build()
	if err := cluster.UpdateTenantRecord(context.Background(), w.c, w.c, testLiqoNS, f.id, true, func(r *cluster.TenantRecord) error {
		r.Namespace, r.NamespaceUID = f.ns, f.nsUID
		if rec != nil {
			rec(r)
		}
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	w.r = &Reconciler{Client: w.c, APIReader: w.c, Placement: placement.Placement{Cache: w.c, Live: w.c, LiqoNamespace: testLiqoNS},
		Recorder: w.recorder, Keys: cluster.FixedKeys{Current: f.clusterKey}, Now: func() time.Time { return f.now },
		Self:    authenticationv1.UserInfo{Username: "system:serviceaccount:liqo:liqo-auth-manager", UID: "manager-uid"},
		Options: issuing.Options{APIServer: testAPIServer, CA: f.caPEM, NonceTTL: time.Hour, CertificateLifetime: testLifetime, CSRTimeout: time.Minute}}
	w.writes.Start()
	return w
}

// funcs counts every write and answers SubjectAccessReviews, which a fake client cannot.
func (w *world) funcs() interceptor.Funcs {
	f := controllertest.Counting(w.writes.Note)
	create := f.Create
	f.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
			sar.Status.Allowed = w.allowed != nil && w.allowed(sar)
			return nil
		}
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			// The API server records the requester: the manager.
			csr.Spec.Username, csr.Spec.UID = w.r.Self.Username, w.r.Self.UID
		}
		if err := w.refused("create", obj); err != nil {
			return err
		}
		return create(ctx, c, obj, opts...)
	}
	subUpdate := f.SubResourceUpdate
	f.SubResourceUpdate = func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if err := subUpdate(ctx, c, sub, obj, opts...); err != nil || sub != "approval" || !w.signs {
			return err
		}
		csr := obj.(*certificatesv1.CertificateSigningRequest)
		csr.Status.Certificate = w.certPEM
		return c.SubResource("status").Update(ctx, csr)
	}
	patch := f.Patch
	f.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		if err := w.refused("patch", obj); err != nil {
			return err
		}
		return patch(ctx, c, obj, p, opts...)
	}
	return f
}

// refusing is a world.refuse that fails the writes of kind T with verb, with the error
// msg, and lets every other write through.
func refusing[T client.Object](verb, msg string) func(string, client.Object) error {
	return func(v string, obj client.Object) error {
		if _, ok := obj.(T); ok && v == verb {
			return errors.New(msg)
		}
		return nil
	}
}

// refused is the error w.refuse gives a write (nil: none, or no refuse set).
func (w *world) refused(verb string, obj client.Object) error {
	if w.refuse == nil {
		return nil
	}
	return w.refuse(verb, obj)
}

// reconcile runs one Reconcile of the Tenant and returns it as saved, with the writes made
// and the Events recorded.
func (w *world) reconcile() (ctrl.Result, *authv1beta1.Tenant, map[string]int, []string) {
	w.t.Helper()
	w.writes.Take()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: w.id}})
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	evs := controllertest.Events(w.recorder)
	t := &authv1beta1.Tenant{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: w.id}, t); err != nil {
		w.t.Fatal(err)
	}
	writes := w.writes.Take()
	return res, t, writes, evs
}

// record reads the tenant record.
func (w *world) record() *cluster.TenantRecord {
	return must(cluster.GetTenantRecord(context.Background(), w.c, testLiqoNS, w.id))
}
