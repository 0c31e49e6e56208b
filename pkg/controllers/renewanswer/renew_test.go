package renewanswer

import (
	"context"
	"crypto"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

const (
	testID       = "cl-consumer"
	testNS       = "liqo-tenant-cl-consumer"
	testLiqoNS   = "liqo"
	testProvider = "cl-provider"
	testCert     = "-----BEGIN CERTIFICATE-----\nthe Tenant's own\n-----END CERTIFICATE-----\n"
)

// must is v, or a panic: the tests' crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// keys are the provider's (which seals acceptances), the consumer's (accepted) and
// another one.
type keys struct{ provider, consumer, other crypto.Signer }

func newKeys(t *testing.T) keys {
	t.Helper()
	return keys{provider: must(authn.GenerateKey(authn.Ed25519)), consumer: must(authn.GenerateKey(authn.Ed25519)),
		other: must(authn.GenerateKey(authn.Ed25519))}
}

// acceptedTenant is testID's Tenant, its handshake sealed by sealer, publishing a
// certificate.
func acceptedTenant(t *testing.T, k keys, sealer crypto.Signer) *authv1beta1.Tenant {
	t.Helper()
	csr := must(authn.ForgeCSR(k.consumer, testID))
	fp := must(authn.Fingerprint(k.consumer.Public()))
	tn := &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testID, UID: "tenant-uid", Labels: map[string]string{wire.RemoteClusterIDLabel: testID}},
		Spec:       authv1beta1.TenantSpec{ClusterID: testID, PublicKey: must(authn.MarshalPublicKey(k.consumer.Public())), CSR: csr},
	}
	seal := must(authn.SealAcceptance(sealer, authn.Acceptance{TenantUID: string(tn.UID), ClusterID: testID, KeyFingerprint: fp, CSRDigest: acceptance.CSRDigest(csr)}))
	tn.Status = authv1beta1.TenantStatus{AcceptedKeyFingerprint: fp, AcceptedCSRDigest: acceptance.CSRDigest(csr), AcceptanceSeal: seal,
		AuthParams: &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: []byte("ca"), SignedCRT: []byte(testCert)}}
	return tn
}

// renew is the Renew a Liqo consumer keeps in its tenant namespace, with its key and a CSR.
func renew(t *testing.T, k keys) *authv1beta1.Renew {
	t.Helper()
	return &authv1beta1.Renew{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: wire.IdentityName(testProvider)},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: testID, IdentityType: authv1beta1.ControlPlaneIdentityType,
			PublicKey: must(authn.MarshalPublicKey(k.consumer.Public())), CSR: must(authn.ForgeCSR(k.consumer, testID))},
	}
}

// env is a provider on a fake client: the tenant namespace of testID, recorded, and a
// namespace that carries the same labels but is not recorded.
type env struct {
	c   client.Client
	rec *events.FakeRecorder
	r   *Reconciler
	mu  sync.Mutex
	// writes are the writes the reconciler made, as "verb Kind[/sub]".
	writes []string
}

func (e *env) note(verb string, obj client.Object, sub string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writes = append(e.writes, verb+" "+controllertest.Kind(obj, sub))
}

func setup(t *testing.T, k keys, state authv1beta1.TenantCondition, objs ...client.Object) *env {
	t.Helper()
	e := &env{rec: events.NewFakeRecorder(100)}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, UID: "ns-uid", Labels: cluster.TenantNamespaceLabels(testID)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "squat", UID: "squat-uid", Labels: cluster.TenantNamespaceLabels(testID)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "liqo-uid"}})
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Renew{}, &authv1beta1.Tenant{}).
		WithObjects(objs...).WithInterceptorFuncs(controllertest.Counting(e.note)).Build()
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, testID, true, func(rec *cluster.TenantRecord) error {
		rec.Namespace, rec.NamespaceUID, rec.State = testNS, "ns-uid", string(state)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.writes = nil
	e.r = &Reconciler{Client: e.c, Placement: placement.Placement{Cache: e.c, Live: e.c, LiqoNamespace: testLiqoNS}, Recorder: e.rec,
		Keys: cluster.FixedKeys{Current: k.provider}, ClusterID: testProvider}
	return e
}

// reconcile answers rn once and returns it as saved, the writes made and the Events.
func (e *env) reconcile(t *testing.T, rn *authv1beta1.Renew) (*authv1beta1.Renew, []string, []string) {
	t.Helper()
	e.mu.Lock()
	e.writes = nil
	e.mu.Unlock()
	got := &authv1beta1.Renew{}
	_, found, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(rn), got)
	if err != nil || !found {
		t.Fatalf("reconcile: %v (found %v)", err, found)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return got, slices.Clone(e.writes), controllertest.Events(e.rec)
}

func hasEvent(evs []string, evType, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, evType+" "+reason+" ") })
}

// TestRefusedRenews: a Renew that is misplaced, asks for another identity type, has no
// Tenant sealed by this provider (none, unaccepted, sealed by another key, a forged
// fingerprint, Drained, no certificate yet) or carries another key or CSR is not answered:
// a Warning Event with the reason, no write at all (no CSR created, no status), and a
// status some writer left in the Renew stays as it was.
func TestRefusedRenews(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  authv1beta1.TenantCondition
		mutate func(t *testing.T, k keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) (tenant client.Object)
		reason string
	}{
		{"in a namespace labelled for the consumer but not recorded", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Namespace, tn.Namespace = "squat", "squat"
			return tn
		}, authv1beta1.ReasonRenewMisplaced},
		{"in the tenant namespace of another consumer ID", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.ConsumerClusterID = "cl-other"
			return tn
		}, authv1beta1.ReasonRenewMisplaced},
		{"naming no consumer", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.ConsumerClusterID = ""
			return tn
		}, authv1beta1.ReasonRenewMisplaced},
		{"for a ResourceSlice identity", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.IdentityType = authv1beta1.ResourceSliceIdentityType
			return tn
		}, authv1beta1.ReasonRenewUnsupported},
		{"no Tenant", "", func(*testing.T, keys, *authv1beta1.Renew, *authv1beta1.Tenant) client.Object { return nil }, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant not accepted", "", func(_ *testing.T, _ keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			tn.Status = authv1beta1.TenantStatus{AuthParams: tn.Status.AuthParams}
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant sealed by another key", "", func(t *testing.T, k keys, _ *authv1beta1.Renew, _ *authv1beta1.Tenant) client.Object {
			return acceptedTenant(t, k, k.other)
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant whose seal lost its bytes", "", func(_ *testing.T, _ keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			tn.Status.AcceptanceSeal = nil
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant whose spec key changed after the seal", "", func(t *testing.T, k keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			tn.Spec.PublicKey = must(authn.MarshalPublicKey(k.other.Public()))
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Drained Tenant", authv1beta1.TenantConditionDrained, func(_ *testing.T, _ keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant drained by its spec", "", func(_ *testing.T, _ keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			tn.Spec.TenantCondition = authv1beta1.TenantConditionDrained
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"a Tenant with no certificate yet", "", func(_ *testing.T, _ keys, _ *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			tn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: []byte("ca")}
			return tn
		}, authv1beta1.ReasonRenewNoTenant},
		{"the public key of another cluster", "", func(t *testing.T, k keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.PublicKey = must(authn.MarshalPublicKey(k.other.Public()))
			return tn
		}, authv1beta1.ReasonRenewKeyMismatch},
		{"a public key that does not parse", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.PublicKey = []byte("not a key")
			return tn
		}, authv1beta1.ReasonRenewKeyMismatch},
		{"a CSR of another key", "", func(t *testing.T, k keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.CSR = must(authn.ForgeCSR(k.other, testID))
			return tn
		}, authv1beta1.ReasonRenewKeyMismatch},
		{"a CSR of the accepted key for another user", "", func(t *testing.T, k keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.CSR = must(authn.ForgeCSR(k.consumer, "cl-other"))
			return tn
		}, authv1beta1.ReasonRenewKeyMismatch},
		{"an oversized CSR", "", func(_ *testing.T, _ keys, rn *authv1beta1.Renew, tn *authv1beta1.Tenant) client.Object {
			rn.Spec.CSR = make([]byte, authn.MaxCSRSize+1)
			return tn
		}, authv1beta1.ReasonRenewKeyMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeys(t)
			rn, tn := renew(t, k), acceptedTenant(t, k, k.provider)
			left := &authv1beta1.AuthParams{APIServer: "https://left.example", SignedCRT: []byte("left by a status writer")}
			rn.Status.AuthParams = left
			objs := []client.Object{rn}
			if o := tc.mutate(t, k, rn, tn); o != nil {
				objs = append(objs, o)
			}
			e := setup(t, k, tc.state, objs...)
			got, writes, evs := e.reconcile(t, rn)
			if !hasEvent(evs, corev1.EventTypeWarning, tc.reason) || len(evs) != 1 {
				t.Errorf("events %v, want one Warning %s", evs, tc.reason)
			}
			if len(writes) != 0 {
				t.Errorf("a refused Renew caused writes %v", writes)
			}
			if !reflect.DeepEqual(got.Status.AuthParams, left) {
				t.Errorf("status became %+v", got.Status.AuthParams)
			}
		})
	}
}

// TestAnsweredRenew: a Renew of the accepted consumer, with or without its key and CSR
// (the Tenant's own CSR too), is answered with the Tenant's own authentication parameters,
// whatever its status said, by one status write and an Event; nothing is created (no CSR
// is signed from a Renew); answered again, nothing is written.
func TestAnsweredRenew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(rn *authv1beta1.Renew, tn *authv1beta1.Tenant)
	}{
		{"with its key and a fresh CSR", func(*authv1beta1.Renew, *authv1beta1.Tenant) {}},
		{"with neither key nor CSR, no identity type", func(rn *authv1beta1.Renew, _ *authv1beta1.Tenant) {
			rn.Spec.PublicKey, rn.Spec.CSR, rn.Spec.IdentityType = nil, nil, ""
		}},
		{"with the Tenant's own CSR", func(rn *authv1beta1.Renew, tn *authv1beta1.Tenant) { rn.Spec.CSR = tn.Spec.CSR }},
		{"whose status a writer forged", func(rn *authv1beta1.Renew, _ *authv1beta1.Tenant) {
			rn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://evil.example", CA: []byte("evil"), SignedCRT: []byte("evil")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeys(t)
			rn, tn := renew(t, k), acceptedTenant(t, k, k.provider)
			tc.mutate(rn, tn)
			e := setup(t, k, "", rn, tn)
			got, writes, evs := e.reconcile(t, rn)
			if !reflect.DeepEqual(got.Status.AuthParams, tn.Status.AuthParams) {
				t.Errorf("answered %+v, want the Tenant's %+v", got.Status.AuthParams, tn.Status.AuthParams)
			}
			if want := []string{"update Renew/status"}; !slices.Equal(writes, want) {
				t.Errorf("writes %v, want %v", writes, want)
			}
			if !hasEvent(evs, corev1.EventTypeNormal, authv1beta1.ReasonRenewAnswered) || len(evs) != 1 {
				t.Errorf("events %v, want one Normal %s", evs, authv1beta1.ReasonRenewAnswered)
			}
			if _, writes, evs := e.reconcile(t, rn); len(writes) != 0 || len(evs) != 0 {
				t.Errorf("answered again: writes %v, events %v", writes, evs)
			}
		})
	}
}

// TestGoneRenew: a Renew that is not there, or is being deleted, is left alone.
func TestGoneRenew(t *testing.T) {
	k := newKeys(t)
	rn, tn := renew(t, k), acceptedTenant(t, k, k.provider)
	rn.Finalizers, rn.DeletionTimestamp = []string{"keep"}, &metav1.Time{Time: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := setup(t, k, "", rn, tn)
	got, writes, evs := e.reconcile(t, rn)
	if got.Status.AuthParams != nil || len(writes) != 0 || len(evs) != 0 {
		t.Errorf("a Renew being deleted: status %+v, writes %v, events %v", got.Status.AuthParams, writes, evs)
	}
	missing := &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "missing"}}
	if _, found, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(missing), missing); err != nil || found {
		t.Errorf("a missing Renew: %v, found %v", err, found)
	}
}

// TestKeyRotationRenewIsNoRenewal: the Renew named wire.KeyRotationRenewName, in the
// tenant namespace of an accepted Tenant, is not answered here (the keyrotation controller
// follows it): no status, no Event.
func TestKeyRotationRenewIsNoRenewal(t *testing.T) {
	k := newKeys(t)
	rn := renew(t, k)
	rn.Name = wire.KeyRotationRenewName
	e := setup(t, k, authv1beta1.TenantConditionActive, acceptedTenant(t, k, k.provider), rn)
	got, writes, evs := e.reconcile(t, rn)
	if len(writes) != 0 || len(evs) != 0 || got.Status.AuthParams != nil {
		t.Errorf("the key-rotation Renew was answered as a renewal: writes %v, events %v", writes, evs)
	}
}
