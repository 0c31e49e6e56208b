package consumerslice

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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
	liqoNS     = "liqo"
	consumerID = "consumer-a"
	providerID = "provider-a"
	tenantNS   = "liqo-tenant-provider-a"
	remoteNS   = "liqo-tenant-consumer-a"
	sliceName  = "slice-1"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// counts counts the writes made through a fake client.
type counts struct {
	mu                          sync.Mutex
	status, patch, update, made int
}

func (c *counts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status + c.patch + c.update + c.made
}

func (c *counts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status, c.patch, c.update, c.made = 0, 0, 0, 0
}

func (c *counts) inc(n *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n++
}

// counting is interceptors that count writes in n; failCreate, when set, fails creations.
func counting(n *counts, failCreate error) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.inc(&n.made)
			if failCreate != nil {
				return failCreate
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n.inc(&n.update)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n.inc(&n.patch)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			n.inc(&n.status)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

type env struct {
	key crypto.Signer
	c   client.Client
	n   *counts
	rec *events.FakeRecorder
	r   *Reconciler
}

// setup is a consumer holding objs; recorded says whether its record names tenantNS as
// the tenant namespace of providerID.
func setup(t *testing.T, recorded bool, objs ...client.Object) *env {
	t.Helper()
	key, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, UID: "ns-uid",
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: providerID}}}
	e := &env{n: &counts{}, rec: events.NewFakeRecorder(100)}
	s := scheme.New()
	e.c = fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&authv1beta1.ResourceSlice{}).
		WithObjects(append([]client.Object{ns}, objs...)...).WithInterceptorFuncs(counting(e.n, nil)).Build()
	if recorded {
		if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, providerID, true, func(r *cluster.TenantRecord) error {
			r.Namespace, r.NamespaceUID = tenantNS, ns.UID
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.n.reset()
	e.r = &Reconciler{Client: e.c, Scheme: s, Placement: placement.Placement{Cache: e.c, LiqoNamespace: liqoNS}, Recorder: e.rec,
		ClusterID: consumerID, Keys: cluster.FixedKeys{Current: key}, Now: func() time.Time { return now }}
	e.key = key
	return e
}

// request is a slice the consumer asks provider providerID for, created age ago.
func request(name string, age time.Duration) *authv1beta1.ResourceSlice {
	return &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name, UID: "slice-uid",
		CreationTimestamp: metav1.NewTime(now.Add(-age)),
		Labels:            map[string]string{wire.ReplicationRequestedLabel: "true", wire.RemoteClusterIDLabel: providerID}}}
}

func (e *env) reconcile(t *testing.T, name string) (ctrl.Result, *authv1beta1.ResourceSlice, error) {
	rs := &authv1beta1.ResourceSlice{}
	res, there, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKey{Namespace: tenantNS, Name: name}, rs)
	if !there {
		rs = nil
	}
	return res, rs, err
}

func (e *env) events() []string {
	return controllertest.Events(e.rec)
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events %q; want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("event %d %q; want %q", i, got[i], want[i])
		}
	}
}

// TestNotRequested: what the controller leaves alone, or refuses with an Event only.
func TestNotRequested(t *testing.T) {
	notRequest := request("other", 0)
	notRequest.Labels = map[string]string{wire.RemoteClusterIDLabel: providerID}
	badName := request("slice.with.dots", 0)
	for _, tc := range []struct {
		name     string
		recorded bool
		rs       *authv1beta1.ResourceSlice
		events   []string
		msg      string
	}{
		{"not a request", true, notRequest, nil, ""},
		{"invalid name", true, badName, []string{"Warning " + authv1beta1.ReasonSliceMisplaced}, "not requested: the ResourceSlice name"},
		{"unknown tenant namespace", false, request(sliceName, 0), []string{"Warning " + authv1beta1.ReasonSliceMisplaced}, "this cluster never made one for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, tc.recorded, tc.rs)
			res, got, err := e.reconcile(t, tc.rs.Name)
			if err != nil || res != (ctrl.Result{}) {
				t.Fatalf("result %+v, %v", res, err)
			}
			evs := e.events()
			wantEvents(t, evs, tc.events...)
			if tc.msg != "" && !strings.Contains(evs[0], tc.msg) {
				t.Fatalf("event %q does not say %q", evs[0], tc.msg)
			}
			if e.n.total() != 0 || len(got.Finalizers) != 0 || got.Spec.CSR != nil {
				t.Fatalf("writes %+v; slice %+v", e.n, got)
			}
		})
	}
}

// TestCompletesThenWaitsForTheControlPlane: a placed slice gets the finalizer and its
// spec completed; without a control-plane identity it is tried again later, at the pace
// noControlPlaneRetry says.
func TestCompletesThenWaitsForTheControlPlane(t *testing.T) {
	e := setup(t, true, request(sliceName, 0))
	res, got, err := e.reconcile(t, sliceName)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v", res, err)
	}
	if !slices.Contains(got.Finalizers, wire.ConsumerSliceFinalizer) || e.n.patch != 2 {
		t.Fatalf("finalizers %v, %d patches", got.Finalizers, e.n.patch)
	}
	if got.Spec.ConsumerClusterID == nil || *got.Spec.ConsumerClusterID != consumerID || got.Spec.ProviderClusterID == nil || *got.Spec.ProviderClusterID != providerID {
		t.Fatalf("spec %+v", got.Spec)
	}
	wantSliceCSR(t, got, e.key.Public())
	wantEvents(t, e.events())

	e.n.reset()
	res, _, err = e.reconcile(t, sliceName)
	if err != nil || res.RequeueAfter != noControlPlaneRetry {
		t.Fatalf("result %+v, %v; want a retry after %v", res, err, noControlPlaneRetry)
	}
	if e.n.total() != 0 {
		t.Fatalf("writes %+v", e.n)
	}
	wantEvents(t, e.events(), "Warning "+authv1beta1.ReasonNoControlPlane)
}

// wantSliceCSR checks that the slice's CSR is for its user and this cluster, with key pub.
func wantSliceCSR(t *testing.T, got *authv1beta1.ResourceSlice, pub crypto.PublicKey) {
	t.Helper()
	block, _ := pem.Decode(got.Spec.CSR)
	if block == nil {
		t.Fatal("no CSR")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if user := authn.SliceUserName(sliceName, consumerID); csr.Subject.CommonName != user || !slices.Equal(csr.Subject.Organization, []string{consumerID}) ||
		!authn.PublicKeysEqual(csr.PublicKey, pub) {
		t.Fatalf("CSR for %v", csr.Subject)
	}
}

// TestDeletedWithoutControlPlane: a deleted slice whose copy cannot be reached lets go.
func TestDeletedWithoutControlPlane(t *testing.T) {
	rs := request(sliceName, 0)
	rs.Finalizers = []string{wire.ConsumerSliceFinalizer}
	rs.DeletionTimestamp = &metav1.Time{Time: now}
	e := setup(t, true, rs)
	res, got, err := e.reconcile(t, sliceName)
	if err != nil || res != (ctrl.Result{}) || got != nil {
		t.Fatalf("result %+v, %v; slice %+v", res, err, got)
	}
	wantEvents(t, e.events(), "Warning "+authv1beta1.ReasonNoControlPlane)
}

// provider is the provider's side of a request: a fake client that holds its copies.
func provider(t *testing.T, failCreate error, objs ...client.Object) (client.Client, *counts) {
	t.Helper()
	n := &counts{}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.ResourceSlice{}).
		WithObjects(objs...).WithInterceptorFuncs(counting(n, failCreate)).Build()
	return c, n
}

func decided(auth, res string) []authv1beta1.ResourceSliceCondition { //nolint:unparam // a helper of the tables: each case says both verdicts
	return []authv1beta1.ResourceSliceCondition{
		{Type: authv1beta1.ResourceSliceConditionAuthentication, Status: auth, Reason: "r", Message: "m"},
		{Type: authv1beta1.ResourceSliceConditionResources, Status: res, Reason: "r", Message: "m"},
	}
}

// TestRequest: the slice written to the provider, its answer read back at the paces the
// constants say, and the status written only when the answer changed it.
func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		age     time.Duration
		answer  []authv1beta1.ResourceSliceCondition // nil: none yet
		fail    error
		want    time.Duration
		written bool
		events  []string
	}{
		{name: "new, undecided", age: time.Second, want: answerPoll},
		{name: "old, undecided", age: answerSlowAfter + time.Second, want: answerSlowPoll},
		{name: "accepted, no certificate yet", answer: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceAccepted), want: answerPoll, written: true},
		{name: "denied", answer: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceDenied), want: deniedRecheck, written: true},
		{name: "provider refuses", fail: errors.New("forbidden"), want: providerRetry, events: []string{"Warning " + authv1beta1.ReasonProviderUnreachable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := request(sliceName, tc.age)
			e := setup(t, true, rs)
			var objs []client.Object
			if tc.answer != nil {
				cp := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: sliceName, Labels: copyLabels(consumerID)}, Spec: rs.Spec,
					Status: authv1beta1.ResourceSliceStatus{Conditions: tc.answer}}
				objs = append(objs, cp)
			}
			remote, rn := provider(t, tc.fail, objs...)
			for range 2 {
				e.n.reset()
				res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key})
				if err != nil || res.RequeueAfter != tc.want {
					t.Fatalf("result %+v, %v; want a requeue after %v", res, err, tc.want)
				}
				wantEvents(t, e.events(), tc.events...)
				if got := e.n.status == 1; got != tc.written {
					t.Fatalf("%d status writes; want one: %v", e.n.status, tc.written)
				}
				tc.written = false // the same answer again: nothing to write
			}
			cp := &authv1beta1.ResourceSlice{}
			err := remote.Get(context.Background(), client.ObjectKey{Namespace: remoteNS, Name: sliceName}, cp)
			if tc.fail != nil {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("copy %+v, %v", cp, err)
				}
				return
			}
			if err != nil || cp.Labels[wire.RemoteClusterIDLabel] != consumerID && tc.answer == nil || rn.update != 0 {
				t.Fatalf("copy %+v, %v; provider writes %+v", cp.ObjectMeta, err, rn)
			}
		})
	}
}

// TestRecheck: when a decided slice is read back, by the reconciler's clock.
func TestRecheck(t *testing.T) {
	r := &Reconciler{Now: func() time.Time { return now }}
	accepted := &authv1beta1.ResourceSlice{Status: authv1beta1.ResourceSliceStatus{Conditions: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceAccepted)}}
	denied := &authv1beta1.ResourceSlice{Status: authv1beta1.ResourceSliceStatus{Conditions: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceDenied)}}
	renewing := func(d time.Duration) *authv1beta1.ResourceSlice {
		return &authv1beta1.ResourceSlice{Status: authv1beta1.ResourceSliceStatus{Certificate: &authv1beta1.CertificateInfo{RenewAfter: &metav1.Time{Time: now.Add(d)}}}}
	}
	for _, tc := range []struct {
		name      string
		rs, reply *authv1beta1.ResourceSlice
		want      time.Duration
	}{
		{"accepted", accepted, accepted, acceptedRecheck},
		{"denied", denied, denied, deniedRecheck},
		{"renewal due soon", renewing(10 * time.Second), accepted, 10*time.Second + renewMargin},
		{"renewal overdue", renewing(-time.Hour), accepted, renewMargin},
		{"renewal far", renewing(time.Hour), accepted, acceptedRecheck},
		{"denied, renewal far", renewing(time.Hour), denied, deniedRecheck},
	} {
		if got := r.recheck(tc.rs, tc.reply); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDeletingWaitsForTheProvider: a deleted slice has its provider's copy deleted, is
// read back at providerRemovalPoll while the copy is there, and lets go once it is gone.
func TestDeletingWaitsForTheProvider(t *testing.T) {
	rs := request(sliceName, 0)
	rs.Finalizers = []string{wire.ConsumerSliceFinalizer}
	rs.DeletionTimestamp = &metav1.Time{Time: now}
	e := setup(t, true, rs)
	cp := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: sliceName, Labels: copyLabels(consumerID), Finalizers: []string{wire.ProviderSliceFinalizer}}}
	remote, _ := provider(t, nil, cp)
	for range 2 { // deleted, then still there
		res, err := e.r.deleting(context.Background(), rs, remote, remoteNS, nil)
		if err != nil || res.RequeueAfter != providerRemovalPoll {
			t.Fatalf("result %+v, %v; want a requeue after %v", res, err, providerRemovalPoll)
		}
	}
	if err := remote.Get(context.Background(), client.ObjectKeyFromObject(cp), cp); err != nil || cp.DeletionTimestamp == nil {
		t.Fatalf("copy %+v, %v", cp.ObjectMeta, err)
	}
	cp.Finalizers = nil // the provider's controller let it go
	if err := remote.Update(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if res, err := e.r.deleting(context.Background(), rs, remote, remoteNS, nil); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v", res, err)
	}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the slice is kept: %v", err)
	}
	wantEvents(t, e.events())
}

// TestDeletingLetsGoOfACopyHeldByAnother: a copy being deleted whose provider's finalize is
// done (the provider slice finalizer off, its grant removed) but that another finalizer
// holds (the tenant writes its copies) is given back: the slice is let go, and a teardown
// waiting on it goes on to the control plane (helper-39's F1).
func TestDeletingLetsGoOfACopyHeldByAnother(t *testing.T) {
	rs := request(sliceName, 0)
	rs.Finalizers = []string{wire.ConsumerSliceFinalizer}
	rs.DeletionTimestamp = &metav1.Time{Time: now}
	e := setup(t, true, rs)
	cp := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: sliceName, Labels: copyLabels(consumerID), Finalizers: []string{"example.com/hold", wire.ProviderSliceFinalizer}}}
	remote, _ := provider(t, nil, cp)
	if res, err := e.r.deleting(context.Background(), rs, remote, remoteNS, nil); err != nil || res.RequeueAfter != providerRemovalPoll {
		t.Fatalf("result %+v, %v; want a requeue after %v while the provider finalizes its copy", res, err, providerRemovalPoll)
	}
	if err := remote.Get(context.Background(), client.ObjectKeyFromObject(cp), cp); err != nil || cp.DeletionTimestamp == nil {
		t.Fatalf("copy %+v, %v", cp.ObjectMeta, err)
	}
	wantEvents(t, e.events())                    // nothing to say while the provider finalizes
	cp.Finalizers = []string{"example.com/hold"} // the provider's finalize is done
	if err := remote.Update(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if res, err := e.r.deleting(context.Background(), rs, remote, remoteNS, nil); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v; want the slice let go", res, err)
	}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the slice is kept: %v", err)
	}
	// The copy that stays is said, with who holds it and who lets it go (helper-41).
	got := e.events()
	wantEvents(t, got, "Warning "+authv1beta1.ReasonSliceCopyHeld)
	for _, want := range []string{remoteNS + "/" + sliceName, `"` + providerID + `"`, `finalizer "example.com/hold"`, "grants nothing", "the provider's administrator removes"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("event %q does not say %q", got[0], want)
		}
	}
}

// TestDescribeFinalizers: the finalizers a copy's writer chose are quoted, a few of them.
func TestDescribeFinalizers(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"a.io/x"}, `finalizer "a.io/x"`},
		{[]string{"a.io/x", "b.io/y"}, `finalizers "a.io/x", "b.io/y"`},
		{[]string{"a.io/x", "b.io/y", "c.io/z"}, `finalizers "a.io/x", "b.io/y", "c.io/z"`},
		{[]string{"a.io/x", "b.io/y", "c.io/z", "d.io/w", "e.io/v"}, `finalizers "a.io/x", "b.io/y", "c.io/z" and 2 more`},
		{[]string{"a.io/x\nINFO forged"}, `finalizer "a.io/x\nINFO forged"`}, // a newline shown, not printed
	} {
		if got := describeFinalizers(tc.in); got != tc.want {
			t.Errorf("describeFinalizers(%q) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

// TestProvidersOwnRequestUnderTheNameIsLeftAlone (helper-36's F3): in a two-way peering the
// provider's tenant namespace of this cluster holds the provider's own requests of it too.
// One made under the slice's name before the copy arrived (both sides asking at once, as
// two GitOps repositories may) is not written to, not read as the answer, and not deleted
// with the slice; the slice says its name is taken. A copy relabelled after its grant (the
// provider still finalizes it) is deleted all the same.
func TestProvidersOwnRequestUnderTheNameIsLeftAlone(t *testing.T) {
	theirs := func() *authv1beta1.ResourceSlice {
		return &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: sliceName,
			Labels:     map[string]string{wire.ReplicationRequestedLabel: "true", wire.RemoteClusterIDLabel: consumerID},
			Finalizers: []string{wire.ConsumerSliceFinalizer}},
			Spec: authv1beta1.ResourceSliceSpec{Class: authv1beta1.ResourceSliceClass("theirs")},
			Status: authv1beta1.ResourceSliceStatus{Conditions: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceAccepted),
				AuthParams: &authv1beta1.AuthParams{SignedCRT: []byte("their certificate")}}}
	}

	t.Run("asked", func(t *testing.T) {
		rs := request(sliceName, time.Second)
		rs.Spec.Class = authv1beta1.ResourceSliceClass("mine")
		e := setup(t, true, rs)
		remote, rn := provider(t, nil, theirs())
		res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key})
		if err != nil || res.RequeueAfter != nameTakenRetry {
			t.Fatalf("result %+v, %v; want a requeue after %v", res, err, nameTakenRetry)
		}
		evs := e.events()
		wantEvents(t, evs, "Warning "+authv1beta1.ReasonSliceNameTaken)
		for _, want := range []string{remoteNS + "/" + sliceName, `"` + providerID + `"`, "is not this cluster's copy", "ask under another name"} {
			if !strings.Contains(evs[0], want) {
				t.Errorf("event %q does not say %q", evs[0], want)
			}
		}
		got := &authv1beta1.ResourceSlice{}
		if err := remote.Get(context.Background(), client.ObjectKey{Namespace: remoteNS, Name: sliceName}, got); err != nil {
			t.Fatal(err)
		}
		if rn.total() != 0 || got.Spec.Class != "theirs" {
			t.Fatalf("the provider's request was written: %d writes, class %q", rn.total(), got.Spec.Class)
		}
		if e.n.status != 0 || rs.Status.AuthParams != nil {
			t.Fatalf("their status read as the answer: %d status writes, %+v", e.n.status, rs.Status)
		}
	})

	for _, tc := range []struct {
		name    string
		cp      func() *authv1beta1.ResourceSlice
		made    string // the copy's UID the slice recorded
		deleted bool
	}{
		{"deleted", theirs, "", false},
		{"deleted, after another copy was recorded", theirs, "another-uid", false},
		{"deleted, a copy relabelled while the provider finalizes it", func() *authv1beta1.ResourceSlice {
			cp := theirs()
			cp.Finalizers = []string{wire.ProviderSliceFinalizer}
			return cp
		}, "", true},
		// helper-52: a writer there took the label off (the provider then finalized it) and
		// would put it back once the slice is deleted: the provider would grant it again.
		{"deleted, the copy this cluster made, relabelled after the provider's finalize", func() *authv1beta1.ResourceSlice {
			cp := theirs()
			cp.UID = "copy-uid"
			cp.Finalizers = nil
			return cp
		}, "copy-uid", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := request(sliceName, 0)
			rs.Finalizers = []string{wire.ConsumerSliceFinalizer}
			rs.DeletionTimestamp = &metav1.Time{Time: now}
			e := setup(t, true, rs)
			if tc.made != "" {
				e.recordCopy(t, sliceName, types.UID(tc.made))
			}
			remote, _ := provider(t, nil, tc.cp())
			res, err := e.r.deleting(context.Background(), rs, remote, remoteNS, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := &authv1beta1.ResourceSlice{}
			if err := remote.Get(context.Background(), client.ObjectKey{Namespace: remoteNS, Name: sliceName}, got); apierrors.IsNotFound(err) {
				got.DeletionTimestamp = &metav1.Time{Time: now} // gone at once: no finalizer held it
			} else if err != nil {
				t.Fatal(err)
			}
			if deleted := got.DeletionTimestamp != nil; deleted != tc.deleted {
				t.Fatalf("the provider's slice deleted: %v; want %v", deleted, tc.deleted)
			}
			if tc.deleted {
				if res.RequeueAfter != providerRemovalPoll {
					t.Fatalf("result %+v; want a wait for the provider's finalize", res)
				}
				return
			}
			if res != (ctrl.Result{}) {
				t.Fatalf("result %+v; want the slice let go", res)
			}
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the slice is kept: %v", err)
			}
			if got := e.copies(t); len(got) != 0 {
				t.Fatalf("the record keeps copies %v of a slice let go", got)
			}
		})
	}
}

// recordCopy records uid as the copy of slice name in providerID's tenant record, as the
// controller does when it makes it.
func (e *env) recordCopy(t *testing.T, name string, uid types.UID) {
	t.Helper()
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, providerID, false, func(r *cluster.TenantRecord) error {
		if r.SliceCopies == nil {
			r.SliceCopies = map[string]types.UID{}
		}
		r.SliceCopies[name] = uid
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.n.reset()
}

// copies are the slice copies providerID's tenant record holds.
func (e *env) copies(t *testing.T) map[string]types.UID {
	t.Helper()
	rec, err := cluster.GetTenantRecord(context.Background(), e.c, liqoNS, providerID)
	if err != nil || rec == nil {
		t.Fatalf("record %+v, %v", rec, err)
	}
	return rec.SliceCopies
}

// uidOnCreate is a provider whose API server gives what is created without one the UID uid.
func uidOnCreate(t *testing.T, uid types.UID, objs ...client.Object) client.Client {
	t.Helper()
	n := &counts{}
	f := counting(n, nil)
	create := f.Create
	f.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if obj.GetUID() == "" {
			obj.SetUID(uid)
		}
		return create(ctx, c, obj, opts...)
	}
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.ResourceSlice{}).
		WithObjects(objs...).WithInterceptorFuncs(f).Build()
}

// TestCopyIsKnownByItsUID: the tenant record keeps the UID of the copy the slice's
// controller created on the provider (SliceCopies), and that copy stays the slice's own
// whatever its labels say: a writer there who took the label off is written over and
// answered as before, not taken for the provider's own request (helper-52). The slice's
// own metadata says nothing (helper-53), and a copy found there is never recorded, only
// one created (helper-54).
func TestCopyIsKnownByItsUID(t *testing.T) {
	rs := request(sliceName, time.Second)
	e := setup(t, true, rs)
	remote := uidOnCreate(t, "copy-uid")
	if res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil || res.RequeueAfter != answerPoll {
		t.Fatalf("result %+v, %v", res, err)
	}
	if got := e.copies(t); got[sliceName] != "copy-uid" {
		t.Fatalf("copies %v; want the copy's UID recorded", got)
	}
	e.n.reset()
	if _, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil || e.n.total() != 0 {
		t.Fatalf("%v, writes %+v; want the UID recorded once", err, e.n)
	}

	// The label taken off there: still this cluster's copy.
	cp := &authv1beta1.ResourceSlice{}
	if err := remote.Get(context.Background(), client.ObjectKey{Namespace: remoteNS, Name: sliceName}, cp); err != nil {
		t.Fatal(err)
	}
	delete(cp.Labels, wire.ReplicationStatusLabel)
	cp.Spec.Resources = nil
	if err := remote.Update(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil || res.RequeueAfter == nameTakenRetry {
		t.Fatalf("result %+v, %v; the copy made is taken for someone else's", res, err)
	}
	wantEvents(t, e.events())
	if err := remote.Get(context.Background(), client.ObjectKeyFromObject(cp), cp); err != nil || cp.Spec.Resources.Cpu().String() != "1" {
		t.Fatalf("copy spec %+v, %v; want the slice's", cp.Spec, err)
	}

	// Another object under the name, labelled as a copy for now: written and answered as a
	// copy while it is one, never recorded; unlabelled, not the copy made, whatever the
	// slice's metadata says.
	other := cp.DeepCopy()
	other.UID, other.ResourceVersion, other.Labels = "their-uid", "", copyLabels(consumerID)
	if err := remote.Delete(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if err := remote.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if err := remote.Get(context.Background(), client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil {
		t.Fatal(err)
	}
	if got := e.copies(t); got[sliceName] != "copy-uid" {
		t.Fatalf("copies %v; a copy found there was recorded", got)
	}
	delete(other.Labels, wire.ReplicationStatusLabel)
	if err := remote.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	rs.Annotations = map[string]string{"liqo.io/resourceslice-copy-uid": string(other.UID)}
	if res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil || res.RequeueAfter != nameTakenRetry {
		t.Fatalf("result %+v, %v; want the name taken", res, err)
	}
	wantEvents(t, e.events(), "Warning "+authv1beta1.ReasonSliceNameTaken)
}

// TestUnrecordedCopyIsDeletedAgain: a copy whose UID the tenant record cannot take is
// deleted again, by its UID, and the slice says why (helper-54: many slices at once
// conflicted on the record, and copies stayed unrecorded).
func TestUnrecordedCopyIsDeletedAgain(t *testing.T) {
	rs := request(sliceName, time.Second)
	e := setup(t, true, rs)
	e.r.Client = interceptor.NewClient(e.c.(client.WithWatch), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				return apierrors.NewConflict(corev1.Resource("configmaps"), obj.GetName(), errors.New("the object has been modified"))
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	old := recordBackoff
	recordBackoff.Steps = 2
	t.Cleanup(func() { recordBackoff = old })
	remote := uidOnCreate(t, "copy-uid")
	res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key})
	if err != nil || res.RequeueAfter != providerRetry {
		t.Fatalf("result %+v, %v", res, err)
	}
	evs := e.events()
	wantEvents(t, evs, "Warning "+authv1beta1.ReasonProviderUnreachable)
	if !strings.Contains(evs[0], "recording the copy in the tenant record") {
		t.Errorf("event %q does not say the record failed", evs[0])
	}
	if err := remote.Get(context.Background(), client.ObjectKey{Namespace: remoteNS, Name: sliceName}, &authv1beta1.ResourceSlice{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the unrecorded copy stays: %v", err)
	}
}

// TestSliceCopiesAreBounded: a slice writer's thousands of slices do not fill the tenant
// record, which holds the pins of the provider too: past MaxSliceCopies no copy is made,
// and the slice says why; a slice whose copy is recorded already goes on.
func TestSliceCopiesAreBounded(t *testing.T) {
	rs := request(sliceName, time.Second)
	objs := []client.Object{rs}
	for i := range MaxSliceCopies {
		objs = append(objs, request(fmt.Sprintf("other-%d", i), time.Second))
	}
	e := setup(t, true, objs...)
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, providerID, false, func(r *cluster.TenantRecord) error {
		r.SliceCopies = map[string]types.UID{}
		for i := range MaxSliceCopies {
			r.SliceCopies[fmt.Sprintf("other-%d", i)] = types.UID(fmt.Sprintf("uid-%d", i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	remote, rn := provider(t, nil)
	res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key})
	if err != nil || res.RequeueAfter != nameTakenRetry || rn.made != 0 {
		t.Fatalf("result %+v, %v, %d copies made; want none, and a look again after %v", res, err, rn.made, nameTakenRetry)
	}
	evs := e.events()
	wantEvents(t, evs, "Warning "+authv1beta1.ReasonSliceTooMany)
	if !strings.Contains(evs[0], "delete the slices no longer needed") {
		t.Errorf("event %q does not say what to do", evs[0])
	}
	if got := e.copies(t); len(got) != MaxSliceCopies {
		t.Fatalf("%d copies recorded", len(got))
	}
}

// TestStaleCopiesAreDropped: entries of slices gone without their finalize (a slice writer
// stripped the finalizer, or moved the slice to another provider: helper-54) count for
// nothing against MaxSliceCopies and are dropped at the next copy recorded.
func TestStaleCopiesAreDropped(t *testing.T) {
	rs := request(sliceName, time.Second)
	e := setup(t, true, rs, request("kept", time.Second))
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, providerID, false, func(r *cluster.TenantRecord) error {
		r.SliceCopies = map[string]types.UID{"kept": "kept-uid"}
		for i := range MaxSliceCopies {
			r.SliceCopies[fmt.Sprintf("gone-%d", i)] = types.UID(fmt.Sprintf("uid-%d", i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	remote := uidOnCreate(t, "copy-uid")
	if res, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil || res.RequeueAfter != answerPoll {
		t.Fatalf("result %+v, %v", res, err)
	}
	if got := e.copies(t); len(got) != 2 || got["kept"] != "kept-uid" || got[sliceName] != "copy-uid" {
		t.Fatalf("copies %v; want the live slices' only", got)
	}
}

// TestRecordKeepsTheEntryOfASliceMadeMeanwhile: while one worker makes its copy on the
// provider, another makes slice X's and records it; the first worker's record then keeps
// X's entry (helper-55: the slices listed before its copy was made did not hold X, and
// its record dropped X's entry, leaving X's copy unrecorded).
func TestRecordKeepsTheEntryOfASliceMadeMeanwhile(t *testing.T) {
	rs := request(sliceName, time.Second)
	e := setup(t, true, rs)
	n := &counts{}
	f := counting(n, nil)
	f.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if err := e.c.Create(ctx, request("slice-x", time.Second)); err != nil {
			return err
		}
		e.recordCopy(t, "slice-x", "x-uid")
		obj.SetUID("copy-uid")
		return c.Create(ctx, obj, opts...)
	}
	remote := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.ResourceSlice{}).WithInterceptorFuncs(f).Build()
	if _, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, cluster.KeySet{Current: e.key}); err != nil {
		t.Fatal(err)
	}
	if got := e.copies(t); got[sliceName] != "copy-uid" || got["slice-x"] != "x-uid" {
		t.Fatalf("copies %v; want both slices' copies", got)
	}
}
