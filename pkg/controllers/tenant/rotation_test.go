package tenant

import (
	"context"
	"crypto"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// TestSealByPreviousKeyIsMadeAgain: after this provider switched its key, a Tenant sealed
// by the previous key stays accepted, and is sealed again, over the same acceptance, with
// the current key; one sealed by no key of the set is not.
func TestSealByPreviousKeyIsMadeAgain(t *testing.T) {
	f := newFixture(t)
	tn := f.accepted()
	w := f.newWorld(nil, tn)
	next := must(authn.GenerateKey(authn.Ed25519))
	w.r.Keys = cluster.FixedKeys{Current: next, Previous: f.clusterKey}
	if n := len(must(acceptance.TenantsSealedBy(context.Background(), w.c, f.clusterKey))); n != 1 {
		t.Fatalf("%d Tenants sealed by the previous key before the reconcile, want 1", n)
	}
	_, got, _, evs := w.reconcile()
	acc := authn.Acceptance{TenantUID: string(got.UID), ClusterID: f.id, KeyFingerprint: f.fp, CSRDigest: got.Status.AcceptedCSRDigest}
	if err := authn.VerifyAcceptanceSeal(next.Public(), acc, got.Status.AcceptanceSeal); err != nil {
		t.Fatalf("the seal was not made again with the current key: %v", err)
	}
	if got.Status.AcceptedKeyFingerprint != f.fp || got.Status.AcceptedCSRDigest != tn.Status.AcceptedCSRDigest {
		t.Errorf("the re-seal changed the acceptance: %+v", got.Status)
	}
	if !slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, authv1beta1.ReasonResealed) }) {
		t.Errorf("no %s Event: %v", authv1beta1.ReasonResealed, evs)
	}
	if n := len(must(acceptance.TenantsSealedBy(context.Background(), w.c, f.clusterKey))); n != 0 {
		t.Errorf("%d Tenants still sealed by the previous key", n)
	}

	// A key not in the set seals nothing.
	f2 := newFixture(t)
	w2 := f2.newWorld(nil, f2.accepted())
	w2.r.Keys = cluster.FixedKeys{Current: next}
	_, got2, _, _ := w2.reconcile()
	if c := condition(t, got2, authv1beta1.ConditionAuthenticated); c.Status == metav1.ConditionTrue {
		t.Errorf("a seal by a key outside the set was accepted: %s", c.Reason)
	}
}

// movedTenant is f's accepted Tenant whose spec a rotation moved to key next, with a
// key-bound CSR (or csr when set).
func movedTenant(f *fixture, next crypto.Signer, csr []byte) *authv1beta1.Tenant {
	tn := f.published()
	tn.Spec.PublicKey = must(authn.MarshalPublicKey(next.Public()))
	if csr == nil {
		csr = must(authn.ForgeKeyBoundCSRFor(next, f.id, wire.UserGroup))
	}
	tn.Spec.CSR = csr
	return tn
}

// TestRecordedRotationIsAccepted: a Tenant whose spec no longer matches its seal is
// accepted for its new key only when the tenant record holds exactly that rotation, for
// that Tenant, from the sealed key; while it is not done, the bindings name the old
// subject and the new key group, afterwards only the key group.
func TestRecordedRotationIsAccepted(t *testing.T) {
	next := must(authn.GenerateKey(authn.Ed25519))
	toFP := must(authn.Fingerprint(next.Public()))
	keyGroup := must(authn.KeyGroup("cl-consumer", next.Public()))
	for _, tc := range []struct {
		name     string
		rotation func(f *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation
		plainCSR bool
		accepted bool
	}{
		{name: "recorded", accepted: true, rotation: func(f *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation {
			return &cluster.KeyRotation{TenantUID: string(tn.UID), From: f.fp, To: toFP, CSRDigest: authn.CSRDigest(tn.Spec.CSR), FromSubjectKind: rbacv1.UserKind, FromSubjectName: f.id}
		}},
		{name: "no rotation recorded", rotation: func(*fixture, *authv1beta1.Tenant) *cluster.KeyRotation { return nil }},
		{name: "another Tenant's", rotation: func(f *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation {
			return &cluster.KeyRotation{TenantUID: "other-uid", From: f.fp, To: toFP, CSRDigest: authn.CSRDigest(tn.Spec.CSR)}
		}},
		{name: "from another key", rotation: func(_ *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation {
			return &cluster.KeyRotation{TenantUID: string(tn.UID), From: "sha256:other", To: toFP, CSRDigest: authn.CSRDigest(tn.Spec.CSR)}
		}},
		{name: "another CSR", rotation: func(f *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation {
			return &cluster.KeyRotation{TenantUID: string(tn.UID), From: f.fp, To: toFP, CSRDigest: "other"}
		}},
		{name: "CSR not key-bound", plainCSR: true, rotation: func(f *fixture, tn *authv1beta1.Tenant) *cluster.KeyRotation {
			return &cluster.KeyRotation{TenantUID: string(tn.UID), From: f.fp, To: toFP, CSRDigest: authn.CSRDigest(tn.Spec.CSR)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var csr []byte
			if tc.plainCSR {
				csr = must(authn.ForgeCSR(next, f.id))
			}
			tn := movedTenant(f, next, csr)
			rot := tc.rotation(f, tn)
			w := f.newWorld(func(r *cluster.TenantRecord) { r.KeyRotation = rot }, tn)
			_, got, _, _ := w.reconcile()
			c := condition(t, got, authv1beta1.ConditionAuthenticated)
			if !tc.accepted {
				if c.Status == metav1.ConditionTrue || got.Status.AcceptedKeyFingerprint == toFP {
					t.Fatalf("accepted without the recorded rotation: %s, key %s", c.Reason, got.Status.AcceptedKeyFingerprint)
				}
				return
			}
			if c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonKeyRotationAccepted || got.Status.AcceptedKeyFingerprint != toFP {
				t.Fatalf("Authenticated %s %s (%s), key %s", c.Status, c.Reason, c.Message, got.Status.AcceptedKeyFingerprint)
			}
			acc := authn.Acceptance{TenantUID: string(got.UID), ClusterID: f.id, KeyFingerprint: toFP, CSRDigest: authn.CSRDigest(got.Spec.CSR)}
			if err := authn.VerifyAcceptanceSeal(f.clusterKey.Public(), acc, got.Status.AcceptanceSeal); err != nil {
				t.Fatalf("the new acceptance is not sealed: %v", err)
			}
			if got.Status.AuthParams != nil && string(got.Status.AuthParams.SignedCRT) == string(f.certPEM) {
				t.Errorf("the old key's certificate is still published")
			}
			want := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: keyGroup}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: f.id}}
			assertBindingSubjects(t, w, want)

			// Done: only the new key group stays bound.
			if err := cluster.UpdateTenantRecord(context.Background(), w.c, w.c, testLiqoNS, f.id, false, func(r *cluster.TenantRecord) error {
				r.KeyRotation.Done = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			w.reconcile()
			assertBindingSubjects(t, w, want[:1])
		})
	}
}

// TestRotatedAwayKeyIsNeverAcceptedAgain: once a rotation moved a Tenant away from a key,
// a handshake of that key in that Tenant (a Tenant writer putting the old spec back while
// the nonce lives) is refused.
func TestRotatedAwayKeyIsNeverAcceptedAgain(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant.DeepCopy() // the old spec, with its live nonce signature, not accepted
	w := f.newWorld(func(r *cluster.TenantRecord) {
		r.KeyRotation = &cluster.KeyRotation{TenantUID: string(tn.UID), From: f.fp, To: "sha256:new", CSRDigest: "d", Done: true}
	}, tn, f.nonceSecret())
	_, got, _, _ := w.reconcile()
	if c := condition(t, got, authv1beta1.ConditionAuthenticated); c.Status == metav1.ConditionTrue || c.Reason != authv1beta1.ReasonHandshakeChanged {
		t.Fatalf("the key rotated away from was accepted again: %s %s", c.Status, c.Reason)
	}
}

// TestApprovalMovesWithTheRotation: an approval of the key rotated from covers the key
// rotated to; a key approved under no rotation waits.
func TestApprovalMovesWithTheRotation(t *testing.T) {
	next := must(authn.GenerateKey(authn.Ed25519))
	toFP := must(authn.Fingerprint(next.Public()))
	f := newFixture(t)
	tn := movedTenant(f, next, nil)
	rec := &cluster.TenantRecord{Approval: &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: f.fp, At: f.now},
		KeyRotation: &cluster.KeyRotation{TenantUID: string(tn.UID), From: f.fp, To: toFP, CSRDigest: authn.CSRDigest(tn.Spec.CSR)}}
	accepted := tn.DeepCopy()
	accepted.Status.AcceptedKeyFingerprint = toFP
	w := f.newWorld(nil)
	v, err := w.r.approval(context.Background(), accepted, rec)
	if err != nil || !v.approved {
		t.Fatalf("the approval of key %s did not move to key %s: %+v %v", f.fp, toFP, v, err)
	}
	rec.KeyRotation = nil
	if v, _ := w.r.approval(context.Background(), accepted, rec); v.approved {
		t.Errorf("an approval of another key covered key %s without a rotation", toFP)
	}
}

func assertBindingSubjects(t *testing.T, w *world, want []rbacv1.Subject) {
	t.Helper()
	for _, name := range []string{wire.ControlPlaneBindingName, wire.TenantReaderName} {
		var rb rbacv1.RoleBinding
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, &rb); err != nil {
			t.Fatalf("RoleBinding %s: %v", name, err)
		}
		if !slices.Equal(rb.Subjects, want) {
			t.Errorf("RoleBinding %s names %v, want %v", name, rb.Subjects, want)
		}
	}
}

var _ = time.Second
