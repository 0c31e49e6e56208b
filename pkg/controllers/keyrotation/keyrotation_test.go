package keyrotation

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

const (
	testID       = "cl-consumer"
	testNS       = "liqo-tenant-cl-consumer"
	testLiqoNS   = "liqo"
	testProvider = "cl-provider"
	testUID      = "tenant-uid"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// keys are the provider's, the consumer's old (sealed) and new keys, and another one.
type keys struct{ provider, old, next, other crypto.Signer }

func newKeys() keys {
	gen := func() crypto.Signer { return must(authn.GenerateKey(authn.Ed25519)) }
	return keys{provider: gen(), old: gen(), next: gen(), other: gen()}
}

// tenant is testID's Tenant, accepted for key old and sealed by the provider.
func tenant(k keys) *authv1beta1.Tenant {
	csr := must(authn.ForgeCSR(k.old, testID))
	fp := must(authn.Fingerprint(k.old.Public()))
	t := &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testID, UID: testUID, Labels: map[string]string{wire.RemoteClusterIDLabel: testID}},
		Spec:       authv1beta1.TenantSpec{ClusterID: testID, PublicKey: must(authn.MarshalPublicKey(k.old.Public())), CSR: csr},
	}
	t.Status.AcceptedKeyFingerprint, t.Status.AcceptedCSRDigest = fp, authn.CSRDigest(csr)
	t.Status.AcceptanceSeal = must(authn.SealAcceptance(k.provider, authn.Acceptance{TenantUID: testUID, ClusterID: testID, KeyFingerprint: fp, CSRDigest: authn.CSRDigest(csr)}))
	return t
}

// forge is what a rotation Renew's author chooses: who signs with which key, over which
// Tenant UID.
type forge struct {
	oldSigner, newSigner crypto.Signer
	tenantUID, from      string
	csr                  []byte
}

// rotationRenew is the Renew a consumer moving from k.old to k.next writes, as f forges it
// (zero f: the honest one).
func rotationRenew(k keys, f forge) *authv1beta1.Renew {
	if f.oldSigner == nil {
		f.oldSigner = k.old
	}
	if f.newSigner == nil {
		f.newSigner = k.next
	}
	if f.tenantUID == "" {
		f.tenantUID = testUID
	}
	if f.from == "" {
		f.from = must(authn.Fingerprint(k.old.Public()))
	}
	if f.csr == nil {
		f.csr = must(authn.ForgeKeyBoundCSRFor(k.next, testID, wire.UserGroup))
	}
	rot := authn.Rotation{ConsumerID: testID, ProviderID: testProvider, TenantUID: f.tenantUID, From: f.from,
		To: must(authn.Fingerprint(k.next.Public())), CSRDigest: authn.CSRDigest(f.csr)}
	enc := base64.StdEncoding.EncodeToString
	return &authv1beta1.Renew{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: wire.KeyRotationRenewName, Annotations: map[string]string{
			wire.RotationFromAnnotation:         f.from,
			wire.RotationOldSignatureAnnotation: enc(must(authn.SignRotation(f.oldSigner, rot))),
			wire.RotationNewSignatureAnnotation: enc(must(authn.SignRotation(f.newSigner, rot))),
		}},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: testID, IdentityType: authv1beta1.ControlPlaneIdentityType,
			PublicKey: must(authn.MarshalPublicKey(k.next.Public())), CSR: f.csr},
	}
}

// honestRequest is the request of the honest Renew, over the accepted Tenant.
func honestRequest(k keys) *request {
	return &request{renew: rotationRenew(k, forge{}), providerID: testProvider, tenant: tenant(k), record: &cluster.TenantRecord{RemoteID: testID}}
}

// TestChecks: each check refuses what it must with its reason, the first failing check
// decides, and an honest request is proven.
func TestChecks(t *testing.T) {
	k := newKeys()
	for _, tc := range []struct {
		name   string
		change func(q *request)
		reason string
	}{
		{name: "honest"},
		{name: "misplaced", reason: authv1beta1.ReasonKeyRotationMisplaced, change: func(q *request) { q.misplaced = "not recorded" }},
		{name: "misplaced wins over a bad signature", reason: authv1beta1.ReasonKeyRotationMisplaced, change: func(q *request) {
			q.misplaced = "not recorded"
			q.renew = rotationRenew(k, forge{oldSigner: k.other})
		}},
		{name: "slice identity", reason: authv1beta1.ReasonKeyRotationMisplaced, change: func(q *request) { q.renew.Spec.IdentityType = authv1beta1.ResourceSliceIdentityType }},
		{name: "not accepted", reason: authv1beta1.ReasonKeyRotationTenantNotAccepted, change: func(q *request) { q.notAccepted = "Drained" }},
		{name: "from another key", reason: authv1beta1.ReasonKeyRotationFromMismatch, change: func(q *request) {
			q.renew = rotationRenew(k, forge{from: must(authn.Fingerprint(k.other.Public()))})
		}},
		{name: "old signature by another key", reason: authv1beta1.ReasonKeyRotationOldSignatureInvalid, change: func(q *request) { q.renew = rotationRenew(k, forge{oldSigner: k.other}) }},
		{name: "old signature by the new key", reason: authv1beta1.ReasonKeyRotationOldSignatureInvalid, change: func(q *request) { q.renew = rotationRenew(k, forge{oldSigner: k.next}) }},
		{name: "another Tenant UID", reason: authv1beta1.ReasonKeyRotationOldSignatureInvalid, change: func(q *request) { q.renew = rotationRenew(k, forge{tenantUID: "other-uid"}) }},
		{name: "another provider", reason: authv1beta1.ReasonKeyRotationOldSignatureInvalid, change: func(q *request) { q.providerID = "cl-other" }},
		{name: "no old signature", reason: authv1beta1.ReasonKeyRotationOldSignatureInvalid, change: func(q *request) { delete(q.renew.Annotations, wire.RotationOldSignatureAnnotation) }},
		{name: "new key not a key", reason: authv1beta1.ReasonKeyRotationNewKeyInvalid, change: func(q *request) { q.renew.Spec.PublicKey = []byte("garbage") }},
		{name: "CSR not key-bound", reason: authv1beta1.ReasonKeyRotationCSRInvalid, change: func(q *request) {
			q.renew = rotationRenew(k, forge{csr: must(authn.ForgeCSR(k.next, testID))})
		}},
		{name: "CSR of another key", reason: authv1beta1.ReasonKeyRotationCSRInvalid, change: func(q *request) {
			q.renew = rotationRenew(k, forge{csr: must(authn.ForgeKeyBoundCSRFor(k.other, testID, wire.UserGroup))})
		}},
		{name: "new signature by another key", reason: authv1beta1.ReasonKeyRotationNewSignatureInvalid, change: func(q *request) { q.renew = rotationRenew(k, forge{newSigner: k.other}) }},
		{name: "new signature by the old key", reason: authv1beta1.ReasonKeyRotationNewSignatureInvalid, change: func(q *request) { q.renew = rotationRenew(k, forge{newSigner: k.old}) }},
		{name: "another rotation not done", reason: authv1beta1.ReasonKeyRotationConflict, change: func(q *request) {
			q.record.KeyRotation = &cluster.KeyRotation{TenantUID: testUID, From: "sha256:x", To: "sha256:y"}
		}},
		{name: "another rotation done", change: func(q *request) {
			q.record.KeyRotation = &cluster.KeyRotation{TenantUID: testUID, From: "sha256:x", To: "sha256:y", Done: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := honestRequest(k)
			if tc.change != nil {
				tc.change(q)
			}
			v := decide(q)
			if tc.reason == "" {
				if v.rotation == nil {
					t.Fatalf("refused: %s %s", v.reason, v.message)
				}
				if v.rotation.To != must(authn.Fingerprint(k.next.Public())) || v.rotation.TenantUID != testUID {
					t.Errorf("proved %+v", v.rotation)
				}
				return
			}
			if v.rotation != nil || v.reason != tc.reason {
				t.Fatalf("got %q (%s), rotation %v; want %q", v.reason, v.message, v.rotation, tc.reason)
			}
		})
	}
}

// env is a provider on a fake client: the tenant namespace of testID, recorded, its
// accepted Tenant, and the reconciler.
type env struct {
	c      client.Client
	rec    *events.FakeRecorder
	r      *Reconciler
	writes controllertest.Writes
	// allowed answers the SubjectAccessReviews.
	allowed bool
}

func setup(t *testing.T, k keys, objs ...client.Object) *env {
	t.Helper()
	e := &env{rec: events.NewFakeRecorder(100)}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, UID: "ns-uid", Labels: cluster.TenantNamespaceLabels(testID)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "liqo-uid"}})
	funcs := controllertest.Counting(e.writes.Note)
	create := funcs.Create
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
			sar.Status.Allowed = e.allowed
			return nil
		}
		return create(ctx, c, obj, opts...)
	}
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Renew{}, &authv1beta1.Tenant{}).
		WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, testID, true, func(rec *cluster.TenantRecord) error {
		rec.Namespace, rec.NamespaceUID = testNS, "ns-uid"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.writes.Start()
	e.r = &Reconciler{Client: e.c, APIReader: e.c, Placement: placement.Placement{Cache: e.c, Live: e.c, LiqoNamespace: testLiqoNS}, Recorder: e.rec,
		Keys: cluster.FixedKeys{Current: k.provider}, ClusterID: testProvider, Now: func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) }}
	return e
}

func (e *env) reconcile(t *testing.T) (map[string]int, []string) {
	t.Helper()
	_, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: wire.KeyRotationRenewName}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return e.writes.Take(), controllertest.Events(e.rec)
}

func (e *env) record(t *testing.T) *cluster.TenantRecord {
	t.Helper()
	return must(cluster.GetTenantRecord(context.Background(), e.c, testLiqoNS, testID))
}

func (e *env) tenant(t *testing.T) *authv1beta1.Tenant {
	t.Helper()
	tn := &authv1beta1.Tenant{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: testID}, tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

func hasEvent(evs []string, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, reason) })
}

// TestForgedRequestChangesNothing: a refused request writes nothing but its Warning.
func TestForgedRequestChangesNothing(t *testing.T) {
	k := newKeys()
	for name, f := range map[string]forge{"old key": {oldSigner: k.other}, "new key": {newSigner: k.other}, "Tenant UID": {tenantUID: "other"}} {
		t.Run(name, func(t *testing.T) {
			e := setup(t, k, tenant(k), rotationRenew(k, f))
			writes, evs := e.reconcile(t)
			for w := range writes {
				if !strings.HasPrefix(w, "create Event") {
					t.Errorf("a forged rotation wrote %s", w)
				}
			}
			if e.record(t).KeyRotation != nil || e.tenant(t).Status.AcceptedKeyFingerprint != must(authn.Fingerprint(k.old.Public())) ||
				string(e.tenant(t).Spec.PublicKey) != string(must(authn.MarshalPublicKey(k.old.Public()))) {
				t.Errorf("a forged rotation changed the record or the Tenant")
			}
			if len(evs) != 1 || !strings.Contains(evs[0], "Warning") {
				t.Errorf("events %v", evs)
			}
		})
	}
}

// TestRotationIsFollowedToItsEnd: a proven request is recorded (with the old subject) and
// moves the Tenant's spec; once the Tenant publishes the new key's certificate the Renew
// is answered; a done signature by the old key ends nothing, one by the new key ends the
// rotation; the old subject, proven to authorize nothing, is recorded revoked.
func TestRotationIsFollowedToItsEnd(t *testing.T) {
	k := newKeys()
	rn := rotationRenew(k, forge{})
	e := setup(t, k, tenant(k), rn)
	_, evs := e.reconcile(t)
	rot := e.record(t).KeyRotation
	toFP := must(authn.Fingerprint(k.next.Public()))
	if rot == nil || rot.To != toFP || rot.FromSubjectKind != rbacv1.UserKind || rot.FromSubjectName != testID || rot.TenantUID != testUID || rot.Done {
		t.Fatalf("recorded %+v", rot)
	}
	tn := e.tenant(t)
	if string(tn.Spec.CSR) != string(rn.Spec.CSR) || string(tn.Spec.PublicKey) != string(rn.Spec.PublicKey) {
		t.Fatalf("the Tenant's spec did not move")
	}
	if !hasEvent(evs, authv1beta1.ReasonKeyRotationRecorded) {
		t.Errorf("events %v", evs)
	}
	// Again: nothing new (the record holds it; the Tenant is not sealed for it yet).
	if writes, _ := e.reconcile(t); len(writes) != 0 {
		t.Errorf("a second reconcile wrote %v", writes)
	}

	// The tenant controller sealed the new key and published its certificate.
	tn.Status.AcceptedKeyFingerprint, tn.Status.AcceptedCSRDigest = toFP, authn.CSRDigest(tn.Spec.CSR)
	tn.Status.AcceptanceSeal = must(authn.SealAcceptance(k.provider, authn.Acceptance{TenantUID: testUID, ClusterID: testID, KeyFingerprint: toFP, CSRDigest: tn.Status.AcceptedCSRDigest}))
	tn.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://p", CA: []byte("ca"), SignedCRT: selfSigned(t, k.next)}
	if err := e.c.Status().Update(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	e.writes.Take()
	_, evs = e.reconcile(t)
	got := &authv1beta1.Renew{}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rn), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.AuthParams == nil || string(got.Status.AuthParams.SignedCRT) != string(tn.Status.AuthParams.SignedCRT) || !hasEvent(evs, authv1beta1.ReasonKeyRotationAnswered) {
		t.Fatalf("not answered: %+v %v", got.Status, evs)
	}

	// A done signature by the old key ends nothing.
	full := authn.Rotation{ConsumerID: testID, ProviderID: testProvider, TenantUID: testUID, From: rot.From, To: rot.To, CSRDigest: rot.CSRDigest}
	setDone(t, e, got, k.old, full)
	if _, evs = e.reconcile(t); e.record(t).KeyRotation.Done || !hasEvent(evs, authv1beta1.ReasonKeyRotationDoneSignatureInvalid) {
		t.Fatalf("a done signature by the old key ended the rotation (events %v)", evs)
	}
	// By the new key: done.
	setDone(t, e, got, k.next, full)
	e.reconcile(t)
	if !e.record(t).KeyRotation.Done {
		t.Fatal("the done signature by the new key did not end the rotation")
	}
	// The old subject still allowed: no proof recorded.
	e.allowed = true
	e.reconcile(t)
	if e.record(t).KeyRotation.Revoked != nil {
		t.Fatal("recorded revoked while SubjectAccessReviews allow")
	}
	e.allowed = false
	_, evs = e.reconcile(t)
	if e.record(t).KeyRotation.Revoked == nil || !hasEvent(evs, authv1beta1.ReasonKeyRotationDone) {
		t.Fatalf("the proof was not recorded: %v", evs)
	}
}

func setDone(t *testing.T, e *env, rn *authv1beta1.Renew, key crypto.Signer, r authn.Rotation) {
	t.Helper()
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rn), rn); err != nil {
		t.Fatal(err)
	}
	rn.Annotations[wire.RotationDoneSignatureAnnotation] = base64.StdEncoding.EncodeToString(must(authn.SignRotationDone(key, r)))
	if err := e.c.Update(context.Background(), rn); err != nil {
		t.Fatal(err)
	}
	e.writes.Take()
}

// selfSigned is a certificate of key (PEM), as a stand-in for the one the signer issues.
func selfSigned(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: testID}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestMoveAfterAConflictIsSaid: the record is written, then the Tenant's move loses a
// race (its cached copy was stale); the next reconcile finds the rotation recorded and
// moves the Tenant, and says so with KeyRotationRecorded, as the first would have (CI
// once waited for that Event forever).
func TestMoveAfterAConflictIsSaid(t *testing.T) {
	k := newKeys()
	rn := rotationRenew(k, forge{})
	e := setup(t, k, tenant(k), rn)
	conflicts := 1
	e.r.Client = interceptor.NewClient(e.c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*authv1beta1.Tenant); ok && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(authv1beta1.GroupVersion.WithResource("tenants").GroupResource(), obj.GetName(), errors.New("modified"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	_, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: wire.KeyRotationRenewName}})
	if !apierrors.IsConflict(errors.Unwrap(err)) {
		t.Fatalf("the first reconcile: %v", err)
	}
	if e.record(t).KeyRotation == nil {
		t.Fatal("the rotation was not recorded before the move")
	}
	_, evs := e.reconcile(t)
	if string(e.tenant(t).Spec.PublicKey) != string(rn.Spec.PublicKey) || !hasEvent(evs, authv1beta1.ReasonKeyRotationRecorded) {
		t.Fatalf("the move after the conflict: spec moved %v, events %v", string(e.tenant(t).Spec.PublicKey) == string(rn.Spec.PublicKey), evs)
	}
}
