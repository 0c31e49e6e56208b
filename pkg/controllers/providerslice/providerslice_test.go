package providerslice

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

const managerUser = "system:serviceaccount:liqo:liqo-auth-manager"

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// writes counts what a reconcile wrote, by kind of call.
type writes struct {
	mu                                 sync.Mutex
	status, patch, update, del, create int
	created                            []client.Object
}

func (w *writes) add(n *int, o client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*n++
	if n == &w.create {
		w.created = append(w.created, o)
	}
}

func (w *writes) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status, w.patch, w.update, w.del, w.create, w.created = 0, 0, 0, 0, 0, nil
}

// liveReader is the API server as the reconciler reads it directly, counting the reads
// of tenant records: each is a request, which the handshake's budget counts.
type liveReader struct {
	client.Reader
	mu      sync.Mutex
	records int
}

func (l *liveReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		l.mu.Lock()
		l.records++
		l.mu.Unlock()
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

// env is a provider, as the fake client holds it: its tenant namespace of testID, recorded.
type env struct {
	k   keys
	c   client.Client
	rec *events.FakeRecorder
	r   *Reconciler
	w   *writes
	// live is the reconciler's APIReader.
	live *liveReader
}

// setup makes the provider: the tenant namespace of testID and its record (changed by
// record), the objects objs, and a reconciler with a fixed clock. The API server's part
// is played by interceptors: it records the manager as the requester of the CSRs it
// creates, and allows no SubjectAccessReview.
func setup(t *testing.T, record func(*cluster.TenantRecord), objs ...client.Object) *env { //nolint:unparam // objs: a case that needs more objects adds them here
	t.Helper()
	e := &env{k: newKeys(t), rec: events.NewFakeRecorder(100), w: &writes{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, UID: "ns-uid",
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: testID}}}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithStatusSubresource(&authv1beta1.ResourceSlice{}, &authv1beta1.Tenant{}, &certificatesv1.CertificateSigningRequest{}).
		WithObjects(append([]client.Object{ns}, objs...)...).
		WithInterceptorFuncs(e.interceptors())
	if err := issuer.IndexByOwner(context.Background(), controllertest.Indexer{B: b}, wire.SliceAnnotation); err != nil {
		t.Fatal(err)
	}
	e.c = b.Build()
	if record != nil {
		if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, testID, true, func(rec *cluster.TenantRecord) error {
			rec.Namespace, rec.NamespaceUID = testNS, ns.UID
			record(rec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.w.reset()
	e.live = &liveReader{Reader: e.c}
	e.r = &Reconciler{Client: e.c, APIReader: e.live, Placement: placement.Placement{Cache: e.c, LiqoNamespace: testLiqoNS}, Recorder: e.rec,
		Keys: cluster.FixedKeys{Current: e.k.provider}, ClusterID: "provider-x", Now: func() time.Time { return testNow },
		Options: Options{Classes: []string{"gold"}, Tenant: issuing.Options{APIServer: "https://provider.example:6443", CA: []byte("ca"),
			CertificateLifetime: time.Hour, CSRTimeout: time.Minute, RenewBefore: 10 * time.Minute}},
		Issuer: &issuer.Issuer{Client: e.c, APIReader: e.c, Self: authenticationv1.UserInfo{Username: managerUser}, Lifetime: time.Hour, CSRTimeout: time.Minute}}
	return e
}

func (e *env) interceptors() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch o := obj.(type) {
			case *authorizationv1.SubjectAccessReview:
				return nil // not allowed
			case *certificatesv1.CertificateSigningRequest:
				o.Spec.Username = managerUser
			}
			e.w.add(&e.w.create, obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			e.w.add(&e.w.update, obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			e.w.add(&e.w.patch, obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			e.w.add(&e.w.del, obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if sub == "approval" { // the fake knows no approval subresource: a status update stands for it
				return c.Status().Update(ctx, obj)
			}
			e.w.add(&e.w.status, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// reconcile reconciles slice name and returns its result and the slice after it (nil:
// gone).
func (e *env) reconcile(t *testing.T, name string) (ctrl.Result, *authv1beta1.ResourceSlice, error) {
	rs := &authv1beta1.ResourceSlice{}
	res, there, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKey{Namespace: testNS, Name: name}, rs)
	if !there {
		rs = nil
	}
	return res, rs, err
}

// events drains the Events recorded so far.
func (e *env) events() []string {
	return controllertest.Events(e.rec)
}

func wantCondition(t *testing.T, rs *authv1beta1.ResourceSlice, typ, status, reason, msg string) {
	t.Helper()
	c := authv1beta1.SliceCondition(rs.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition: %+v", typ, rs.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) {
		t.Fatalf("%s condition %s/%s %q; want %s/%s containing %q", typ, c.Status, c.Reason, c.Message, status, reason, msg)
	}
	if !c.LastTransitionTime.Time.Equal(testNow) {
		t.Fatalf("%s condition changed at %v, want the reconciler's clock %v", typ, c.LastTransitionTime, testNow)
	}
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

func TestReconcileAccepts(t *testing.T) {
	e := setup(t, func(*cluster.TenantRecord) {})
	tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
	for _, o := range []client.Object{tn, rs} {
		if err := e.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	e.w.reset()
	res, got, err := e.reconcile(t, testSlice)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("result %+v: the pending certificate is not waited for", res)
	}
	user := authn.SliceUserName(testSlice, testID)
	wantAccepted(t, e, got, user)
	// The CSR is for the slice's user and group, approved; the signer is the integration
	// tests' to play.
	wantCSR(t, e.c, got, user)
	if e.w.status != 1 {
		t.Fatalf("%d status writes, want 1", e.w.status)
	}
	if e.live.records != 1 {
		t.Fatalf("the limits were read %d times from the API server, want once", e.live.records)
	}

	// Nothing changed: nothing is written again, and a slice that keeps its grant has
	// no limit to read.
	e.w.reset()
	e.live.records = 0
	if _, _, err := e.reconcile(t, testSlice); err != nil {
		t.Fatal(err)
	}
	if e.w.status+e.w.patch+e.w.update+e.w.create+e.w.del != 0 {
		t.Fatalf("an unchanged slice was written: %+v", e.w)
	}
	if e.live.records != 0 {
		t.Fatalf("the limits of a slice that keeps its grant were read %d times", e.live.records)
	}
	wantEvents(t, e.events())
}

// wantAccepted checks an accepted slice: its status, finalizer, Events and the access of
// its identity, its grant recorded on the Role.
func wantAccepted(t *testing.T, e *env, got *authv1beta1.ResourceSlice, user string) {
	t.Helper()
	wantCondition(t, got, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceAccepted, authv1beta1.ReasonSliceAuthenticationAccepted,
		`identity "`+user+`" (group "`+testID+`") for the consumer's accepted key`)
	wantCondition(t, got, authv1beta1.ResourceSliceConditionResources, authv1beta1.ResourceSliceAccepted, authv1beta1.ReasonSliceResourcesAccepted,
		`class "default", resources as requested`)
	if got.Status.Class != DefaultClass || !got.Status.Resources.Cpu().Equal(resource.MustParse("1")) || got.Status.ObservedGeneration != got.Generation {
		t.Fatalf("status %+v", got.Status)
	}
	if !slices.Contains(got.Finalizers, wire.ProviderSliceFinalizer) {
		t.Fatalf("no finalizer: %v", got.Finalizers)
	}
	wantEvents(t, e.events(), "Normal "+authv1beta1.ReasonSliceAuthenticationAccepted, "Normal "+authv1beta1.ReasonSliceResourcesAccepted)
	grants, err := e.r.grants(context.Background(), testNS)
	if g := grants[got.UID]; err != nil || !g.Cpu().Equal(resource.MustParse("1")) {
		t.Fatalf("grants %v, %v", grants, err)
	}
	var rb rbacv1.RoleBinding
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: wire.SliceAccessName(testSlice)}, &rb); err != nil || rb.Subjects[0].Name != user {
		t.Fatalf("RoleBinding %+v, %v", rb.Subjects, err)
	}
}

func wantCSR(t *testing.T, c client.Client, rs *authv1beta1.ResourceSlice, user string) {
	t.Helper()
	var csrs certificatesv1.CertificateSigningRequestList
	if err := c.List(context.Background(), &csrs); err != nil {
		t.Fatal(err)
	}
	if len(csrs.Items) != 1 {
		t.Fatalf("%d CSRs, want 1", len(csrs.Items))
	}
	csr := csrs.Items[0]
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if req.Subject.CommonName != user || !slices.Equal(req.Subject.Organization, []string{testID}) {
		t.Fatalf("CSR for %v; want CN=%s, O=%s", req.Subject, user, testID)
	}
	if csr.Labels[wire.TenantUIDLabel] != string(rs.UID) || csr.Annotations[wire.SliceAnnotation] != testNS+"/"+testSlice ||
		csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		t.Fatalf("CSR %+v", csr.ObjectMeta)
	}
	if approved, _, _ := issuer.CSRState(&csr); approved == nil {
		t.Fatalf("CSR not approved: %+v", csr.Status)
	}
}

// denial is a slice the provider denies, and how.
type denial struct {
	name    string
	record  func(*cluster.TenantRecord) // nil: no record, no tenant namespace
	objects func(t *testing.T, e *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object
	options func(*Options)
	// typ, reason and msg of the condition denied; authenticated: Authentication is
	// accepted; finalized: the slice got the finalizer.
	typ, reason, msg         string
	authenticated, finalized bool
}

func both(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
	return []client.Object{tn, rs}
}

// grantRole is the Role of a slice granted l before.
func grantRole(t *testing.T, rs *authv1beta1.ResourceSlice, l corev1.ResourceList) client.Object {
	t.Helper()
	role := access.SliceAccessObjects(rs.Namespace, rs.Name, access.SliceSubject(authn.SliceUserName(rs.Name, testID), ""), testID, l)[0]
	role.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "ResourceSlice", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}})
	return role
}

func denials() []denial {
	auth, res := authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceConditionResources
	authDenied, resDenied := authv1beta1.ReasonSliceAuthenticationDenied, authv1beta1.ReasonSliceResourcesDenied
	none := func(*cluster.TenantRecord) {}
	return []denial{
		{name: "unknown tenant namespace", objects: both, typ: auth, reason: authDenied,
			msg: `namespace "` + testNS + `" is not the tenant namespace of cluster "` + testID + `": this cluster never made one`},
		{name: "another namespace recorded", record: func(r *cluster.TenantRecord) { r.Namespace = "liqo-tenant-other" }, objects: both, typ: auth, reason: authDenied,
			msg: `"liqo-tenant-other" is`},
		{name: "no Tenant", record: none, objects: func(_ *testing.T, _ *env, _ *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			return []client.Object{rs}
		}, typ: auth, reason: authDenied, finalized: true, msg: "there is no Tenant " + testNS + "/" + testID},
		{name: "Tenant not accepted", record: none, objects: func(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			tn.Status = authv1beta1.TenantStatus{AcceptedKeyFingerprint: tn.Status.AcceptedKeyFingerprint}
			return []client.Object{tn, rs}
		}, typ: auth, reason: authDenied, finalized: true, msg: "is not accepted by this provider"},
		{name: "Cordoned by the record", record: func(r *cluster.TenantRecord) { r.State = string(authv1beta1.TenantConditionCordoned) }, objects: both,
			typ: auth, reason: authDenied, finalized: true, msg: "is Cordoned: it gets no new ResourceSlice"},
		{name: "Cordoned by the Tenant", record: none, objects: func(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			tn.Spec.TenantCondition = authv1beta1.TenantConditionCordoned
			return []client.Object{tn, rs}
		}, typ: auth, reason: authDenied, finalized: true, msg: "is Cordoned"},
		{name: "Cordoned, granted less", record: func(r *cluster.TenantRecord) { r.State = string(authv1beta1.TenantConditionCordoned) },
			objects: func(t *testing.T, e *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
				return []client.Object{tn, rs, grantRole(t, rs, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")})}
			}, typ: res, reason: resDenied, finalized: true, msg: "its slices keep what they were granted (cpu=500m)"},
		{name: "CSR for another key", record: none, objects: func(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			rs.Spec.CSR = otherCSR(nil, authn.SliceUserName(rs.Name, testID), testID)
			return []client.Object{tn, rs}
		}, typ: auth, reason: authDenied, finalized: true, msg: "spec.csr:"},
		{name: "user is a consumer", record: none, objects: func(t *testing.T, e *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, testLiqoNS, authn.SliceUserName(rs.Name, testID), true, func(*cluster.TenantRecord) error { return nil }); err != nil {
				t.Fatal(err)
			}
			return []client.Object{tn, rs}
		}, typ: auth, reason: authDenied, finalized: true, msg: "is the cluster ID of a consumer of this provider"},
		{name: "one slice too many", record: none, options: func(o *Options) { o.MaxPerTenant = 1 },
			objects: func(t *testing.T, e *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
				old := providerCopy(t, e.k, "slice-0")
				old.CreationTimestamp = metav1.NewTime(rs.CreationTimestamp.Add(-time.Hour))
				return []client.Object{tn, rs, old}
			}, typ: res, reason: resDenied, authenticated: true, finalized: true, msg: "decides at most 1 per tenant"},
		{name: "negative quantity", record: none, objects: func(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
			return []client.Object{tn, rs}
		}, typ: res, reason: resDenied, authenticated: true, finalized: true, msg: "no negative quantity: cpu=-1"},
		{name: "default class disabled", record: none, options: func(o *Options) { o.DisableDefaultClass = true }, objects: both,
			typ: res, reason: authv1beta1.ReasonDefaultSliceClassDisabled, authenticated: true, finalized: true, msg: "ask for one of gold"},
		{name: "class not offered", record: none, objects: func(_ *testing.T, _ *env, tn *authv1beta1.Tenant, rs *authv1beta1.ResourceSlice) []client.Object {
			rs.Spec.Class = "silver"
			return []client.Object{tn, rs}
		}, typ: res, reason: resDenied, authenticated: true, finalized: true, msg: `class "silver" is not offered`},
		{name: "over the limits", record: func(r *cluster.TenantRecord) {
			r.SliceLimits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		}, objects: both, typ: res, reason: resDenied, authenticated: true, finalized: true, msg: "cpu=1 asked, 0 of the 500m"},
	}
}

func TestReconcileDenies(t *testing.T) {
	for _, tc := range denials() {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, tc.record)
			if tc.options != nil {
				tc.options(&e.r.Options)
			}
			tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
			for _, o := range tc.objects(t, e, tn, rs) {
				if err := e.c.Create(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			e.w.reset()
			res, got, err := e.reconcile(t, testSlice)
			if err != nil || res != (ctrl.Result{}) {
				t.Fatalf("result %+v, %v", res, err)
			}
			wantCondition(t, got, tc.typ, authv1beta1.ResourceSliceDenied, tc.reason, tc.msg)
			evs := []string{"Warning " + tc.reason}
			if tc.authenticated {
				wantCondition(t, got, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceAccepted,
					authv1beta1.ReasonSliceAuthenticationAccepted, "the slice's CSR is for the consumer's accepted key")
				evs = append([]string{"Normal " + authv1beta1.ReasonSliceAuthenticationAccepted}, evs...)
			} else if other := otherType(tc.typ); authv1beta1.SliceCondition(got.Status.Conditions, other) != nil {
				t.Fatalf("%s set: %+v", other, got.Status.Conditions)
			}
			wantEvents(t, e.events(), evs...)
			if slices.Contains(got.Finalizers, wire.ProviderSliceFinalizer) != tc.finalized {
				t.Fatalf("finalizers %v; want the finalizer: %v", got.Finalizers, tc.finalized)
			}
			if n := e.w.create; n != 0 {
				t.Fatalf("a denied slice caused %d creations: %v", n, e.w.created)
			}
			// Denied again the same way: nothing is written.
			e.w.reset()
			if _, _, err := e.reconcile(t, testSlice); err != nil {
				t.Fatal(err)
			}
			if e.w.status+e.w.patch+e.w.update+e.w.create+e.w.del != 0 {
				t.Fatalf("an unchanged denial was written again: %+v", e.w)
			}
			wantEvents(t, e.events())
		})
	}
}

func otherType(typ string) string {
	if typ == authv1beta1.ResourceSliceConditionAuthentication {
		return authv1beta1.ResourceSliceConditionResources
	}
	return authv1beta1.ResourceSliceConditionAuthentication
}

func TestReconcileDrained(t *testing.T) {
	e := setup(t, func(r *cluster.TenantRecord) { r.State = string(authv1beta1.TenantConditionDrained) })
	tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
	for _, o := range []client.Object{tn, rs} {
		if err := e.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	e.w.reset()
	res, got, err := e.reconcile(t, testSlice)
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("result %+v, %v", res, err)
	}
	// The finalizer was put first (the slice was in its place): the deletion waits on it.
	if got == nil || got.DeletionTimestamp == nil || e.w.del != 1 || e.w.status != 0 {
		t.Fatalf("slice %+v; writes %+v", got, e.w)
	}
	if len(got.Status.Conditions) != 0 {
		t.Fatalf("a drained slice is deleted, not decided: %+v", got.Status.Conditions)
	}
	wantEvents(t, e.events(), "Normal ResourceSliceDeleted")
}

// TestReconcileIgnores: slices this controller does not decide.
func TestReconcileIgnores(t *testing.T) {
	e := setup(t, func(*cluster.TenantRecord) {})
	own := providerCopy(t, e.k, "own")
	own.Spec.ConsumerClusterID = ptr.To(authv1beta1.ClusterID("provider-x"))
	local := providerCopy(t, e.k, "local")
	local.Labels = nil
	for _, o := range []client.Object{own, local} {
		if err := e.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	e.w.reset()
	for _, n := range []string{"own", "local", "missing"} {
		if res, got, err := e.reconcile(t, n); err != nil || res != (ctrl.Result{}) || (got != nil && len(got.Status.Conditions) != 0) {
			t.Fatalf("%s: %+v, %+v, %v", n, res, got, err)
		}
	}
	if e.w.status+e.w.patch+e.w.update+e.w.create+e.w.del != 0 {
		t.Fatalf("writes %+v", e.w)
	}
}

// TestSliceNoLongerACopyKeepsNothing: the tenant writes its slices, the label that makes
// one a copy and the consumer's ID among them. A slice granted access that stops being a
// copy (its label taken off, or this provider's ID put as its consumer) loses its access,
// its requests and this controller's finalizer, so that a finalizer of the tenant's own
// cannot hold it, access and all, out of this controller's hands.
func TestSliceNoLongerACopyKeepsNothing(t *testing.T) {
	for name, hide := range map[string]func(*authv1beta1.ResourceSlice){
		"label taken off": func(rs *authv1beta1.ResourceSlice) { delete(rs.Labels, wire.ReplicationStatusLabel) },
		"the provider as consumer": func(rs *authv1beta1.ResourceSlice) {
			rs.Spec.ConsumerClusterID = ptr.To(authv1beta1.ClusterID("provider-x"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := setup(t, func(*cluster.TenantRecord) {})
			tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
			for _, o := range []client.Object{tn, rs} {
				if err := e.c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if _, got, err := e.reconcile(t, testSlice); err != nil || !slices.Contains(got.Finalizers, wire.ProviderSliceFinalizer) {
				t.Fatalf("not accepted: %v", err)
			}
			got := &authv1beta1.ResourceSlice{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: testSlice}, got); err != nil {
				t.Fatal(err)
			}
			hide(got)
			got.Finalizers = append(got.Finalizers, "attacker.example/hold")
			if err := e.c.Update(ctx, got); err != nil {
				t.Fatal(err)
			}
			_, got, err := e.reconcile(t, testSlice)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, wire.ProviderSliceFinalizer) {
				t.Errorf("the finalizer stays: %v", got.Finalizers)
			}
			for _, o := range access.SliceAccessObjects(testNS, testSlice, rbacv1.Subject{}, testID, nil) {
				if err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
					t.Errorf("%T %s stays (%v)", o, o.GetName(), err)
				}
			}
			var csrs certificatesv1.CertificateSigningRequestList
			if err := e.c.List(ctx, &csrs, client.MatchingLabels{wire.TenantUIDLabel: string(got.UID)}); err != nil || len(csrs.Items) != 0 {
				t.Errorf("requests stay: %d (%v)", len(csrs.Items), err)
			}
		})
	}
}
