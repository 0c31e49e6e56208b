package peergc

import (
	"context"
	"crypto"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

const (
	testID     = "cl-consumer"
	testNS     = "liqo-tenant-cl-consumer"
	testLiqoNS = "liqo"
	goneAfter  = time.Hour
)

var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// must is v, or a panic: the tests' crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// sealedTenant is testID's Tenant in ns, its acceptance sealed by sealer. A status writer
// dated its acceptance a year back: the collection never counts from it.
func sealedTenant(sealer crypto.Signer, ns string) *authv1beta1.Tenant {
	consumer := must(authn.GenerateKey(authn.Ed25519))
	csr := must(authn.ForgeCSR(consumer, testID))
	fp := must(authn.Fingerprint(consumer.Public()))
	tn := &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testID, UID: "tenant-uid", Finalizers: []string{wire.TenantFinalizer},
			Labels: map[string]string{wire.RemoteClusterIDLabel: testID}},
		Spec: authv1beta1.TenantSpec{ClusterID: testID, PublicKey: must(authn.MarshalPublicKey(consumer.Public())), CSR: csr},
	}
	tn.Status = authv1beta1.TenantStatus{AcceptedKeyFingerprint: fp, AcceptedCSRDigest: acceptance.CSRDigest(csr),
		AcceptanceSeal: must(authn.SealAcceptance(sealer, authn.Acceptance{TenantUID: string(tn.UID), ClusterID: testID, KeyFingerprint: fp, CSRDigest: acceptance.CSRDigest(csr)})),
		AcceptedAt:     &metav1.Time{Time: testNow.Add(-365 * 24 * time.Hour)}}
	return tn
}

// presence is the presence Lease of tn, created created ago, renewed renewed ago (never
// when nil).
func presence(tn *authv1beta1.Tenant, created time.Duration, renewed *time.Duration) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tn.Namespace, Name: wire.PresenceLeaseName,
		CreationTimestamp: metav1.NewTime(testNow.Add(-created)),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Tenant", Name: tn.Name, UID: tn.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
	if renewed != nil {
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(testNow.Add(-*renewed)))
	}
	return l
}

// slice is a ResourceSlice in the tenant namespace for consumer, the provider's copy when
// providerCopy.
func slice(name, consumer string, providerCopy bool) *authv1beta1.ResourceSlice {
	return &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name,
		Labels: map[string]string{wire.RemoteClusterIDLabel: consumer, wire.ReplicationStatusLabel: map[bool]string{true: "true", false: "false"}[providerCopy]}}}
}

type env struct {
	c   client.Client
	rec *events.FakeRecorder
	r   *Reconciler
}

// setup is a provider holding testID's tenant namespace, recorded, a namespace with the same
// labels that is not, and objs, with the reconciler collecting after goneAfter.
func setup(t *testing.T, key crypto.Signer, objs ...client.Object) *env {
	t.Helper()
	e := &env{rec: events.NewFakeRecorder(100)}
	objs = append(objs,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, UID: "ns-uid", Labels: cluster.TenantNamespaceLabels(testID)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "squat", UID: "squat-uid", Labels: cluster.TenantNamespaceLabels(testID)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "liqo-uid"}})
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Tenant{}, &authv1beta1.ResourceSlice{}).
		WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		// The API server stamps what it creates; the fake client does not.
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetCreationTimestamp(metav1.NewTime(testNow))
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, testID, true, func(rec *cluster.TenantRecord) error {
		rec.Namespace, rec.NamespaceUID, rec.State = testNS, "ns-uid", "Active"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.r = &Reconciler{Client: e.c, Keys: cluster.FixedKeys{Current: key}, Live: e.c, Placement: placement.Placement{Cache: e.c, Live: e.c, LiqoNamespace: testLiqoNS},
		Recorder: e.rec, GoneAfter: goneAfter, Now: func() time.Time { return testNow }}
	return e
}

func (e *env) lease(t *testing.T, ns string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: wire.PresenceLeaseName}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return l
}

func (e *env) sliceNames(t *testing.T) []string {
	t.Helper()
	var l authv1beta1.ResourceSliceList
	if err := e.c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// collected says whether the Tenant was deleted (it keeps its finalizer, so it stays with
// a deletion timestamp).
func collected(t *testing.T, e *env, tn *authv1beta1.Tenant) (authv1beta1.Tenant, bool) {
	t.Helper()
	var got authv1beta1.Tenant
	_, found, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(tn), &got)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return got, !found || got.DeletionTimestamp != nil
}

// TestSilentConsumerIsCollected: a sealed Tenant whose presence Lease was neither renewed
// nor given to it for longer than the grace period is deleted, with the provider's copies
// of the slices given to that consumer, and a Warning Event; another consumer's slices and
// the consumer's own copies stay, and so does the tenant record.
func TestSilentConsumerIsCollected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease func(tn *authv1beta1.Tenant) *coordinationv1.Lease
	}{
		{"never renewed since its creation", func(tn *authv1beta1.Tenant) *coordinationv1.Lease { return presence(tn, goneAfter+time.Second, nil) }},
		{"last renewed exactly the grace period ago", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			return presence(tn, 10*goneAfter, ptr.To(goneAfter))
		}},
		{"a renewal back-dated before the Lease's creation", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			return presence(tn, 2*goneAfter, ptr.To(100*goneAfter))
		}},
		{"given to the Tenant longer ago than the grace period", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			l := presence(tn, 10*goneAfter, nil)
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(testNow.Add(-2 * goneAfter)))
			return l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := must(authn.GenerateKey(authn.Ed25519))
			tn := sealedTenant(key, testNS)
			e := setup(t, key, tn, tc.lease(tn), slice("mine", testID, true), slice("mine-2", testID, true),
				slice("theirs", "cl-other", true), slice("consumer-side", testID, false))
			if _, gone := collected(t, e, tn); !gone {
				t.Fatal("the Tenant of a silent consumer was not deleted")
			}
			if got, want := e.sliceNames(t), []string{"consumer-side", "theirs"}; !slices.Equal(got, want) {
				t.Errorf("slices left %v, want %v", got, want)
			}
			evs := controllertest.Events(e.rec)
			if len(evs) != 1 || !strings.HasPrefix(evs[0], corev1.EventTypeWarning+" "+authv1beta1.ReasonPeerGone+" ") {
				t.Errorf("events %v, want one Warning %s", evs, authv1beta1.ReasonPeerGone)
			}
			if rec, err := cluster.GetTenantRecord(context.Background(), e.c, testLiqoNS, testID); err != nil || rec == nil || rec.State != "Active" {
				t.Errorf("the tenant record did not stay: %+v, %v", rec, err)
			}
		})
	}
}

// TestLiveConsumerIsKept: a Lease renewed (or created, or given to the Tenant) within the
// grace period keeps the Tenant, and the reconcile comes back when the period would end; a
// time in the future counts as now. The Tenant's own acceptedAt, a year back, does not
// count.
func TestLiveConsumerIsKept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lease   func(tn *authv1beta1.Tenant) *coordinationv1.Lease
		requeue time.Duration
	}{
		{"created a minute ago, never renewed", func(tn *authv1beta1.Tenant) *coordinationv1.Lease { return presence(tn, time.Minute, nil) }, goneAfter - time.Minute},
		{"renewed ten minutes ago", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			return presence(tn, 10*goneAfter, ptr.To(10*time.Minute))
		}, goneAfter - 10*time.Minute},
		{"renewed the grace period ago less a millisecond", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			return presence(tn, 10*goneAfter, ptr.To(goneAfter-time.Millisecond))
		}, time.Millisecond},
		{"given to the Tenant a minute ago", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			l := presence(tn, 10*goneAfter, ptr.To(5*goneAfter))
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(testNow.Add(-time.Minute)))
			return l
		}, goneAfter - time.Minute},
		{"renewed with a time a year in the future", func(tn *authv1beta1.Tenant) *coordinationv1.Lease {
			return presence(tn, 10*goneAfter, ptr.To(-365*24*time.Hour))
		}, goneAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := must(authn.GenerateKey(authn.Ed25519))
			tn := sealedTenant(key, testNS)
			e := setup(t, key, tn, tc.lease(tn), slice("mine", testID, true))
			res, err := e.r.Reconcile(context.Background(), reconcileRequest(tn))
			if err != nil {
				t.Fatal(err)
			}
			if _, gone := collected(t, e, tn); gone {
				t.Fatal("the Tenant of a live consumer was deleted")
			}
			if res.RequeueAfter != tc.requeue+time.Second {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.requeue+time.Second)
			}
			if got := e.sliceNames(t); !slices.Equal(got, []string{"mine"}) || len(controllertest.Events(e.rec)) != 0 {
				t.Errorf("slices %v, or Events recorded", got)
			}
		})
	}
}

// TestNotCollected: a Tenant that is not accepted, whose acceptance this provider did not
// seal, that is misplaced (a namespace carrying the labels but not recorded, a name or
// label that is not its cluster ID), or that is already being deleted is never collected,
// however old its Lease, and no Lease is made or changed for it.
func TestNotCollected(t *testing.T) {
	other := must(authn.GenerateKey(authn.Ed25519))
	for _, tc := range []struct {
		name   string
		tenant func(key crypto.Signer) *authv1beta1.Tenant
	}{
		{"not accepted", func(key crypto.Signer) *authv1beta1.Tenant {
			tn := sealedTenant(key, testNS)
			tn.Status = authv1beta1.TenantStatus{}
			return tn
		}},
		{"sealed by another key", func(crypto.Signer) *authv1beta1.Tenant { return sealedTenant(other, testNS) }},
		{"its seal forged by a status writer", func(key crypto.Signer) *authv1beta1.Tenant {
			tn := sealedTenant(key, testNS)
			tn.Status.AcceptanceSeal = []byte("forged")
			return tn
		}},
		{"its spec changed after the seal", func(key crypto.Signer) *authv1beta1.Tenant {
			tn := sealedTenant(key, testNS)
			tn.Spec.CSR = must(authn.ForgeCSR(other, testID))
			return tn
		}},
		{"in a namespace labelled for it but not recorded", func(key crypto.Signer) *authv1beta1.Tenant { return sealedTenant(key, "squat") }},
		{"its label naming another cluster", func(key crypto.Signer) *authv1beta1.Tenant {
			tn := sealedTenant(key, testNS)
			tn.Labels[wire.RemoteClusterIDLabel] = "cl-other"
			return tn
		}},
		{"already being deleted", func(key crypto.Signer) *authv1beta1.Tenant {
			tn := sealedTenant(key, testNS)
			tn.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
			return tn
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := must(authn.GenerateKey(authn.Ed25519))
			tn := tc.tenant(key)
			old := presence(tn, 100*goneAfter, nil)
			e := setup(t, key, tn, old, slice("mine", testID, true))
			before := e.lease(t, tn.Namespace)
			got, gone := collected(t, e, tn)
			if gone && tn.DeletionTimestamp == nil {
				t.Fatal("the Tenant was collected")
			}
			if got.DeletionTimestamp != nil && tn.DeletionTimestamp == nil {
				t.Error("the Tenant is being deleted")
			}
			if after := e.lease(t, tn.Namespace); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the Lease was changed: %+v", after)
			}
			if got := e.sliceNames(t); !slices.Equal(got, []string{"mine"}) || len(controllertest.Events(e.rec)) != 0 {
				t.Errorf("slices %v, or Events recorded", got)
			}
		})
	}
}

// TestLeaseIsCreated: an accepted Tenant with no presence Lease gets one, owned by it and
// labelled for its consumer, lasting the grace period; it is not collected, and the
// reconcile comes back after the grace period.
func TestLeaseIsCreated(t *testing.T) {
	key := must(authn.GenerateKey(authn.Ed25519))
	tn := sealedTenant(key, testNS)
	e := setup(t, key, tn)
	res, err := e.r.Reconcile(context.Background(), reconcileRequest(tn))
	if err != nil {
		t.Fatal(err)
	}
	l := e.lease(t, testNS)
	if l == nil {
		t.Fatal("no presence Lease")
	}
	if !metav1.IsControlledBy(l, tn) || l.Labels[wire.RemoteClusterIDLabel] != testID || l.Labels[wire.ManagedByLabel] != wire.ManagedByValue ||
		ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != int32(goneAfter.Seconds()) {
		t.Errorf("the Lease is %+v", l)
	}
	if res.RequeueAfter != goneAfter+time.Second {
		t.Errorf("requeue after %v", res.RequeueAfter)
	}
	if _, gone := collected(t, e, tn); gone {
		t.Error("a Tenant with a fresh Lease was collected")
	}
}

// TestLeaseOfAnEarlierTenantIsAdopted: the Lease an earlier Tenant of the same consumer
// left, however old, counts for nothing: it is given to the new Tenant from now, which is
// not collected.
func TestLeaseOfAnEarlierTenantIsAdopted(t *testing.T) {
	key := must(authn.GenerateKey(authn.Ed25519))
	tn := sealedTenant(key, testNS)
	earlier := tn.DeepCopy()
	earlier.UID = "earlier-uid"
	old := presence(earlier, 100*goneAfter, ptr.To(50*goneAfter))
	e := setup(t, key, tn, old)
	res, err := e.r.Reconcile(context.Background(), reconcileRequest(tn))
	if err != nil {
		t.Fatal(err)
	}
	l := e.lease(t, testNS)
	if !metav1.IsControlledBy(l, tn) || len(l.OwnerReferences) != 1 {
		t.Errorf("the Lease is owned by %+v", l.OwnerReferences)
	}
	if l.Spec.AcquireTime == nil || !l.Spec.AcquireTime.Time.Equal(testNow) || l.Spec.RenewTime != nil {
		t.Errorf("the Lease was given at %v, renewed %v; want %v and never", l.Spec.AcquireTime, l.Spec.RenewTime, testNow)
	}
	if res.RequeueAfter != goneAfter+time.Second {
		t.Errorf("requeue after %v", res.RequeueAfter)
	}
	if _, gone := collected(t, e, tn); gone {
		t.Error("the Tenant was collected on an earlier Tenant's Lease")
	}
}

func reconcileRequest(tn *authv1beta1.Tenant) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tn)}
}

// failingReader fails every read: the API server is away.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewServiceUnavailable("away")
}

// TestPlacementUnknown: when whether the Tenant sits in its tenant namespace cannot be
// read, the reconcile fails (and is retried); nothing is collected.
func TestPlacementUnknown(t *testing.T) {
	key := must(authn.GenerateKey(authn.Ed25519))
	tn := sealedTenant(key, testNS)
	e := setup(t, key, tn, presence(tn, 100*goneAfter, nil), slice("mine", testID, true))
	e.r.Placement = placement.Placement{Cache: failingReader{}, LiqoNamespace: testLiqoNS}
	var got authv1beta1.Tenant
	if _, found, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(tn), &got); err == nil || !found || got.DeletionTimestamp != nil {
		t.Errorf("error %v, found %v, deleted %v", err, found, got.DeletionTimestamp)
	}
	if got := e.sliceNames(t); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("slices %v", got)
	}
}
