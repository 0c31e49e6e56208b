package renewfollower

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
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
)

const (
	testID       = "cl-consumer"
	testProvider = "cl-provider"
	testNS       = "liqo-tenant-cl-provider"
	testLiqoNS   = "liqo"
)

var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// must is v, or a panic: the tests' crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ca is a certificate authority the tests sign with.
type ca struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
	pem  []byte
}

func newCA(name string) *ca {
	pub, key := must2(ed25519.GenerateKey(rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: testNow.Add(-time.Hour),
		NotAfter: testNow.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key))
	return &ca{cert: must(x509.ParseCertificate(der)), key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// leaf is a client certificate this CA issues to user cn for pub, valid from an hour ago
// for validFor.
func (c *ca) leaf(pub crypto.PublicKey, cn string, serial int64, validFor time.Duration) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{wire.UserGroup}},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(validFor), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// env is a consumer on a fake client: its control-plane Identity for testProvider, holding
// a certificate valid for 12 hours from the pinned CA, and its kubeconfig Secret.
type env struct {
	c        client.Client
	rec      *events.FakeRecorder
	r        *Reconciler
	key      crypto.Signer
	pinned   *ca
	current  []byte
	identity *authv1beta1.Identity
	mu       sync.Mutex
	writes   []string
}

func setup(t *testing.T) *env {
	t.Helper()
	e := &env{rec: events.NewFakeRecorder(100), key: must(authn.GenerateKey(authn.Ed25519)), pinned: newCA("provider-ca")}
	e.current = e.pinned.leaf(e.key.Public(), testID, 10, 12*time.Hour)
	e.identity = &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: wire.IdentityName(testProvider), UID: "identity-uid"},
		Spec: authv1beta1.IdentitySpec{ClusterID: testProvider, Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To("liqo-tenant-" + testID),
			AuthParams: authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: e.pinned.pem, SignedCRT: e.current}},
		Status: authv1beta1.IdentityStatus{KubeconfigSecretRef: &corev1.LocalObjectReference{Name: "kubeconfig-controlplane"}},
	}
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "kubeconfig-controlplane"},
		Data: map[string][]byte{wire.KubeconfigField: []byte("not a kubeconfig")}}
	note := func(verb string, obj client.Object) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.writes = append(e.writes, verb+" "+reflect.TypeOf(obj).Elem().Name())
	}
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Identity{}).
		WithObjects(e.identity.DeepCopy(), kubeconfig).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			note("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			note("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			note("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			note("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	e.r = &Reconciler{Client: e.c, Recorder: e.rec, Scheme: scheme.New(), LiqoNamespace: testLiqoNS, ClusterID: testID, Keys: cluster.FixedKeys{Current: e.key},
		Now: func() time.Time { return testNow }, watchers: map[types.NamespacedName]*watcher{}}
	return e
}

func (e *env) key2() types.NamespacedName { return client.ObjectKeyFromObject(e.identity) }

func (e *env) read(t *testing.T) (*authv1beta1.Identity, *corev1.Secret) {
	t.Helper()
	id, s := &authv1beta1.Identity{}, &corev1.Secret{}
	if err := e.c.Get(context.Background(), e.key2(), id); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "kubeconfig-controlplane"}, s); err != nil {
		t.Fatal(err)
	}
	return id, s
}

// hold puts crt in the Identity, as the certificate it holds.
func (e *env) hold(t *testing.T, crt []byte) {
	t.Helper()
	id, _ := e.read(t)
	id.Spec.AuthParams.SignedCRT = crt
	if err := e.c.Update(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.writes = nil
}

func hasEvent(evs []string, evType, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, evType+" "+reason+" ") })
}

// TestPickUpRefuses: a certificate the provider publishes is taken only when it is for
// this cluster's key and user, chains to the Identity's CA as a client certificate and is
// valid now; otherwise a Warning Event says so, and neither the Identity nor the
// kubeconfig Secret is written.
func TestPickUpRefuses(t *testing.T) {
	other := must(authn.GenerateKey(authn.Ed25519))
	rogue := newCA("rogue-ca")
	// Each case publishes the CA its certificate chains to, as a provider (or whoever
	// wrote its status) would: only the Identity's CA counts.
	for _, tc := range []struct {
		name string
		cert func(e *env) (crt, caPEM []byte)
	}{
		{"for another key", func(e *env) ([]byte, []byte) {
			return e.pinned.leaf(other.Public(), testID, 20, 24*time.Hour), e.pinned.pem
		}},
		{"from another CA", func(e *env) ([]byte, []byte) { return rogue.leaf(e.key.Public(), testID, 20, 24*time.Hour), rogue.pem }},
		{"from another CA, with the pinned CA's name", func(e *env) ([]byte, []byte) {
			impostor := newCA("provider-ca")
			return impostor.leaf(e.key.Public(), testID, 20, 24*time.Hour), impostor.pem
		}},
		{"for another user", func(e *env) ([]byte, []byte) {
			return e.pinned.leaf(e.key.Public(), "cl-other", 20, 24*time.Hour), e.pinned.pem
		}},
		{"expired", func(e *env) ([]byte, []byte) {
			return e.pinned.leaf(e.key.Public(), testID, 20, -time.Minute), e.pinned.pem
		}},
		{"not a certificate", func(e *env) ([]byte, []byte) {
			return []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), e.pinned.pem
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			_, before := e.read(t)
			crt, caPEM := tc.cert(e)
			e.r.pickUp(context.Background(), e.key2(), &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: caPEM, SignedCRT: crt})
			id, after := e.read(t)
			if !bytes.Equal(id.Spec.AuthParams.SignedCRT, e.current) {
				t.Error("the Identity took the refused certificate")
			}
			if after.ResourceVersion != before.ResourceVersion || len(e.writes) != 0 {
				t.Errorf("writes %v; kubeconfig Secret version %s, was %s", e.writes, after.ResourceVersion, before.ResourceVersion)
			}
			if evs := controllertest.Events(e.rec); len(evs) != 1 || !hasEvent(evs, corev1.EventTypeWarning, authv1beta1.ReasonRenewalRefused) {
				t.Errorf("events %v, want one Warning %s", evs, authv1beta1.ReasonRenewalRefused)
			}
		})
	}
}

// TestPickUpIgnores: nothing published, the certificate the Identity holds (even one
// expired since), or one that is valid but expires no later than it, changes nothing and
// says nothing.
func TestPickUpIgnores(t *testing.T) {
	for _, tc := range []struct {
		name string
		ap   func(e *env) *authv1beta1.AuthParams
		// held replaces the certificate the Identity holds (nil: keep it).
		held func(e *env) []byte
	}{
		{"nothing published", func(*env) *authv1beta1.AuthParams { return nil }, nil},
		{"no certificate yet", func(e *env) *authv1beta1.AuthParams { return &authv1beta1.AuthParams{CA: e.pinned.pem} }, nil},
		{"the certificate held", func(e *env) *authv1beta1.AuthParams { return &authv1beta1.AuthParams{SignedCRT: e.current} }, nil},
		{"the certificate held, expired since", func(e *env) *authv1beta1.AuthParams { return &authv1beta1.AuthParams{SignedCRT: e.current} },
			func(e *env) []byte {
				e.current = e.pinned.leaf(e.key.Public(), testID, 9, -time.Minute)
				return e.current
			}},
		{"an older one", func(e *env) *authv1beta1.AuthParams {
			return &authv1beta1.AuthParams{SignedCRT: e.pinned.leaf(e.key.Public(), testID, 5, 6*time.Hour)}
		}, nil},
		{"one expiring at the same time", func(e *env) *authv1beta1.AuthParams {
			return &authv1beta1.AuthParams{SignedCRT: e.pinned.leaf(e.key.Public(), testID, 11, 12*time.Hour)}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			if tc.held != nil {
				e.hold(t, tc.held(e))
			}
			e.r.pickUp(context.Background(), e.key2(), tc.ap(e))
			id, _ := e.read(t)
			if !bytes.Equal(id.Spec.AuthParams.SignedCRT, e.current) || len(e.writes) != 0 {
				t.Errorf("the Identity changed; writes %v", e.writes)
			}
			if evs := controllertest.Events(e.rec); len(evs) != 0 {
				t.Errorf("events %v", evs)
			}
		})
	}
}

// TestPickUpNewer: a newer certificate for this cluster's key from the Identity's CA is
// put in the Identity, by one patch of it alone (its CA and server as they were: only the
// certificate is taken from the provider), with a Normal Event; the kubeconfig Secret is
// left to the identity controller. An Identity that holds no parsable certificate takes
// a valid one too.
func TestPickUpNewer(t *testing.T) {
	for _, tc := range []struct {
		name string
		held func(e *env) []byte
	}{
		{"replacing an older certificate", func(e *env) []byte { return e.current }},
		{"replacing an unparsable certificate", func(*env) []byte { return []byte("garbage") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.hold(t, tc.held(e))
			_, before := e.read(t)
			newer := e.pinned.leaf(e.key.Public(), testID, 30, 24*time.Hour)
			e.r.pickUp(context.Background(), e.key2(), &authv1beta1.AuthParams{APIServer: "https://evil.example", CA: newCA("evil").pem, SignedCRT: newer})
			got, after := e.read(t)
			if !bytes.Equal(got.Spec.AuthParams.SignedCRT, newer) {
				t.Fatal("the newer certificate was not picked up")
			}
			if got.Spec.AuthParams.APIServer != e.identity.Spec.AuthParams.APIServer || !bytes.Equal(got.Spec.AuthParams.CA, e.pinned.pem) {
				t.Errorf("the Identity's server or CA changed: %+v", got.Spec.AuthParams)
			}
			if want := []string{"patch Identity"}; !slices.Equal(e.writes, want) || after.ResourceVersion != before.ResourceVersion {
				t.Errorf("writes %v, want %v (kubeconfig Secret version %s, was %s)", e.writes, want, after.ResourceVersion, before.ResourceVersion)
			}
			if evs := controllertest.Events(e.rec); len(evs) != 1 || !hasEvent(evs, corev1.EventTypeNormal, authv1beta1.ReasonCertificateRenewed) {
				t.Errorf("events %v, want one Normal %s", evs, authv1beta1.ReasonCertificateRenewed)
			}
		})
	}
}

// TestPickUpGoneIdentity: a certificate published for an Identity that is gone writes
// nothing.
func TestPickUpGoneIdentity(t *testing.T) {
	e := setup(t)
	e.r.pickUp(context.Background(), types.NamespacedName{Namespace: testNS, Name: "gone"},
		&authv1beta1.AuthParams{SignedCRT: e.pinned.leaf(e.key.Public(), testID, 30, 24*time.Hour)})
	if len(e.writes) != 0 || len(controllertest.Events(e.rec)) != 0 {
		t.Errorf("writes %v", e.writes)
	}
}

// TestPublished: what a Tenant or a Renew publishes is its status's authentication
// parameters; anything else publishes nothing.
func TestPublished(t *testing.T) {
	ap := &authv1beta1.AuthParams{SignedCRT: []byte("crt")}
	if got := published(&authv1beta1.Tenant{Status: authv1beta1.TenantStatus{AuthParams: ap}}); got != ap {
		t.Errorf("Tenant: %v", got)
	}
	if got := published(&authv1beta1.Renew{Status: authv1beta1.RenewStatus{AuthParams: ap}}); got != ap {
		t.Errorf("Renew: %v", got)
	}
	if got := published(&corev1.Secret{}); got != nil {
		t.Errorf("Secret: %v", got)
	}
}

// TestForgeRenew: the Renew kept on a Liqo provider names this cluster, asks for the
// control-plane identity, and carries this cluster's public key and a valid CSR of it.
func TestForgeRenew(t *testing.T) {
	e := setup(t)
	rn, err := e.r.forgeRenew("liqo-tenant-"+testID, "controlplane-x", e.key)
	if err != nil {
		t.Fatal(err)
	}
	if rn.Namespace != "liqo-tenant-"+testID || rn.Name != "controlplane-x" || rn.Spec.ConsumerClusterID != testID ||
		rn.Spec.IdentityType != authv1beta1.ControlPlaneIdentityType || rn.Labels[wire.RemoteClusterIDLabel] != testID {
		t.Errorf("the Renew is %+v", rn)
	}
	if pub, err := authn.ParsePublicKey(rn.Spec.PublicKey); err != nil || !authn.PublicKeysEqual(pub, e.key.Public()) {
		t.Errorf("spec.publicKey is not this cluster's key: %v", err)
	}
	if _, err := authn.ValidateCSR(rn.Spec.CSR, e.key.Public(), testID); err != nil {
		t.Errorf("spec.csr: %v", err)
	}
}

// TestReconcileWatchers: an Identity that is gone, not a control-plane one or has no
// kubeconfig yet stops its watcher; one whose kubeconfig is not the one liqo-auth wrote
// gets a Warning Event and no watcher; before the manager starts the watchers' lifetime,
// the reconcile comes back shortly.
func TestReconcileWatchers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(id *authv1beta1.Identity)
		gone    bool
		stopped bool
	}{
		{"gone", nil, true, true},
		{"a ResourceSlice identity", func(id *authv1beta1.Identity) { id.Spec.Type = authv1beta1.ResourceSliceIdentityType }, false, true},
		{"no kubeconfig yet", func(id *authv1beta1.Identity) { id.Status.KubeconfigSecretRef = nil }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			id, _ := e.read(t)
			if tc.gone {
				if err := e.c.Delete(context.Background(), id); err != nil {
					t.Fatal(err)
				}
			} else {
				tc.mutate(id)
				if err := e.c.Update(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				tc.mutate(id) // the update read back the status as it was
				if err := e.c.Status().Update(context.Background(), id); err != nil {
					t.Fatal(err)
				}
			}
			cancelled := false
			e.r.watchers[e.key2()] = &watcher{cancel: func() { cancelled = true }}
			if _, err := e.r.Reconcile(context.Background(), reconcileRequest(e.key2())); err != nil {
				t.Fatal(err)
			}
			if _, ok := e.r.watchers[e.key2()]; ok || !cancelled {
				t.Errorf("the watcher is still there (%v) or was not cancelled (%v)", ok, cancelled)
			}
		})
	}

	t.Run("before the watchers' lifetime", func(t *testing.T) {
		e := setup(t)
		res, err := e.r.Reconcile(context.Background(), reconcileRequest(e.key2()))
		if err != nil || res.RequeueAfter != 100*time.Millisecond || len(e.r.watchers) != 0 {
			t.Errorf("result %+v, error %v, watchers %v", res, err, e.r.watchers)
		}
	})

	t.Run("the same kubeconfig", func(t *testing.T) {
		e := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.r.ctx = ctx
		id, s := e.read(t)
		cancelled := false
		w := &watcher{kubeconfigHash: followHash(ptr.Deref(id.Spec.Namespace, ""), s.Data[wire.KubeconfigField]), cancel: func() { cancelled = true }}
		e.r.watchers[e.key2()] = w
		if _, err := e.r.Reconcile(context.Background(), reconcileRequest(e.key2())); err != nil {
			t.Fatal(err)
		}
		if e.r.watchers[e.key2()] != w || cancelled || len(controllertest.Events(e.rec)) != 0 {
			t.Errorf("the watcher of an unchanged kubeconfig was restarted or cancelled (%v)", cancelled)
		}
	})

	t.Run("a kubeconfig liqo-auth did not write", func(t *testing.T) {
		e := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.r.ctx = ctx
		// The watcher of a kubeconfig this Secret held before.
		cancelled := false
		e.r.watchers[e.key2()] = &watcher{kubeconfigHash: [32]byte{1}, cancel: func() { cancelled = true }}
		if _, err := e.r.Reconcile(context.Background(), reconcileRequest(e.key2())); err != nil {
			t.Fatal(err)
		}
		if len(e.r.watchers) != 0 || !cancelled {
			t.Errorf("watchers %v, the earlier one cancelled: %v", e.r.watchers, cancelled)
		}
		if evs := controllertest.Events(e.rec); !hasEvent(evs, corev1.EventTypeWarning, authv1beta1.ReasonKubeconfigRefused) {
			t.Errorf("events %v", evs)
		}
	})
}

func reconcileRequest(key types.NamespacedName) ctrl.Request {
	return ctrl.Request{NamespacedName: key}
}
