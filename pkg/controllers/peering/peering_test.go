package peering

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// world is a consumer cluster (testSelf) whose Peering reaches provider testProvider, both
// on fake clients, with the two-cluster steps faked: what each was called with is kept.
type world struct {
	t    *testing.T
	cred *credential
	// base is the consumer cluster; c is base as the reconciler writes it, its writes
	// counted (the set-up's and the fake steps' are not).
	base, c  client.WithWatch
	provider client.WithWatch
	r        *Reconciler
	recorder *events.FakeRecorder
	writes   controllertest.Writes

	mu sync.Mutex
	// dialed are the provider sides Dial returned, with the kubeconfig each was for.
	dialed     []*handshake.Side
	dialedWith []*authn.KubeconfigInfo
	consumers  []*handshake.Side
	// pairs are the pairs Authenticate ran; retired the sides Retire ran on; left the
	// providers Leave left, with the consumer side it was given.
	pairs    []*handshake.Pair
	retired  []*handshake.Side
	left     []string
	leftFrom []*handshake.Side
	// authenticate is what Authenticate does (w.handshake by default); retireErr and
	// leaveErr what Retire and Leave return.
	authenticate        func(ctx context.Context, p *handshake.Pair) (*authv1beta1.Identity, error)
	retireErr, leaveErr error
}

// clusterIDConfigMap is the ConfigMap a cluster keeps its ID in.
func clusterIDConfigMap(id string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testLiqoNS, Name: wire.ClusterIDConfigMapName,
		Labels: map[string]string{wire.ClusterIDLabelKey: wire.ClusterIDLabelValue}}, Data: map[string]string{wire.ClusterIDKey: id}}
}

// newWorld makes the two clusters: the consumer holds objs besides its Liqo namespace and
// ID.
func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	authority := newCA()
	w := &world{t: t, cred: authority.peeringUser(testSelf), recorder: events.NewFakeRecorder(100)}
	w.authenticate = w.handshake
	objs = append(objs, clusterIDConfigMap(testSelf),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testLiqoNS, UID: "consumer-liqo"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "consumer-system"}})
	w.base = fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.Peering{}).WithObjects(objs...).Build()
	w.c = interceptor.NewClient(w.base, controllertest.Counting(w.writes.Note))
	w.provider = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(clusterIDConfigMap(testProvider),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "provider-system"}}).Build()
	w.r = &Reconciler{Client: w.c, APIReader: w.base, LiqoNamespace: testLiqoNS, ClusterID: testSelf, Recorder: w.recorder,
		AttemptTimeout: time.Minute, Now: func() time.Time { return testNow },
		Consumer: func(r handshake.Reporter) (*handshake.Side, error) {
			s := &handshake.Side{Scope: handshake.Local, Client: w.base, Config: &rest.Config{Host: "https://consumer.example:6443"}, Namespace: testLiqoNS, Report: r}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.consumers = append(w.consumers, s)
			return s, nil
		},
		Dial: func(k *authn.KubeconfigInfo, r handshake.Reporter) (*handshake.Side, error) {
			s := &handshake.Side{Scope: handshake.Remote, Client: w.provider,
				Config: &rest.Config{Host: k.Server, TLSClientConfig: rest.TLSClientConfig{CAData: k.CA, CertData: k.CertPEM, KeyData: k.KeyPEM}}, Report: r}
			s.DetectPeeringUser()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.dialed, w.dialedWith = append(w.dialed, s), append(w.dialedWith, k)
			return s, nil
		},
		Steps: Steps{
			Authenticate: func(ctx context.Context, p *handshake.Pair) (*authv1beta1.Identity, error) {
				w.mu.Lock()
				w.pairs = append(w.pairs, p)
				w.mu.Unlock()
				return w.authenticate(ctx, p)
			},
			Retire: func(_ context.Context, pr *handshake.Side) error {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.retired = append(w.retired, pr)
				return w.retireErr
			},
			Leave: func(_ context.Context, c *handshake.Side, providerID string, now time.Time) error {
				w.mu.Lock()
				defer w.mu.Unlock()
				if !now.Equal(testNow) {
					t.Errorf("Leave at %v, not at the reconciler's clock", now)
				}
				w.left, w.leftFrom = append(w.left, providerID), append(w.leftFrom, c)
				return w.leaveErr
			},
		},
	}
	w.writes.Start()
	return w
}

// handshake plays a handshake that succeeds: the consumer's tenant namespace of the
// provider, recorded, and its ready Identity. It checks first that the Peering claimed the
// provider in the record, and that the credential is not recorded as used yet.
func (w *world) handshake(ctx context.Context, p *handshake.Pair) (*authv1beta1.Identity, error) {
	rec := w.record(testProvider)
	switch {
	case rec == nil || rec.Peering == nil:
		w.t.Errorf("the handshake runs before the Peering claimed %q in its tenant record", testProvider)
	case rec.Peering.Name != testPeering || rec.Peering.UID != string(testUID):
		w.t.Errorf("the handshake runs with the record claimed by %s/%s, not by this Peering", rec.Peering.Name, rec.Peering.UID)
	case rec.ConsumedBootstrap(w.cred.serial) != nil:
		w.t.Errorf("the credential is recorded as used before the handshake ran")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testTenantNS, UID: "tenant-ns-uid", Labels: cluster.TenantNamespaceLabels(testProvider)}}
	if err := w.base.Create(ctx, ns); err != nil {
		return nil, err
	}
	if err := cluster.UpdateTenantRecord(ctx, w.base, w.base, testLiqoNS, testProvider, false, func(r *cluster.TenantRecord) error {
		r.Namespace, r.NamespaceUID = ns.Name, ns.UID
		// What the handshake pins (handshake.pinProviderOnce): this cluster's tenant
		// namespace on the provider, and no proxy.
		r.ProviderTenantNamespace, r.ProxyURL, r.PinnedOnce = wire.TenantNamespaceName(testSelf), new(string), true
		return nil
	}); err != nil {
		return nil, err
	}
	id := readyIdentity(testNow.Add(24 * time.Hour))
	if err := w.base.Create(ctx, id); err != nil {
		return nil, err
	}
	return id, nil
}

// addSecret puts the bootstrap Secret holding kubeconfig in the consumer.
func (w *world) addSecret(kubeconfig []byte) {
	w.t.Helper()
	if err := w.base.Create(context.Background(), bootstrapSecret(kubeconfig)); err != nil {
		w.t.Fatal(err)
	}
}

// addRecord changes (making it) the consumer's tenant record of provider with mutate.
func (w *world) addRecord(provider string, mutate func(*cluster.TenantRecord)) {
	w.t.Helper()
	if err := cluster.UpdateTenantRecord(context.Background(), w.base, w.base, testLiqoNS, provider, true, func(r *cluster.TenantRecord) error {
		mutate(r)
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
}

// reconcile runs one Reconcile of the Peering key and returns it as saved (nil: gone),
// with the writes made and the Events recorded.
func (w *world) reconcile(key client.ObjectKey) (ctrl.Result, *authv1beta1.Peering, map[string]int, []string) {
	w.t.Helper()
	w.writes.Take()
	p := &authv1beta1.Peering{}
	res, found, err := controllertest.Reconcile(w.t, w.r, w.base, key, p)
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	if !found {
		p = nil
	}
	return res, p, w.writes.Take(), controllertest.Events(w.recorder)
}

// record reads the consumer's tenant record of provider (nil: none).
func (w *world) record(provider string) *cluster.TenantRecord {
	w.t.Helper()
	rec, err := cluster.GetTenantRecord(context.Background(), w.base, testLiqoNS, provider)
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

// calls returns how many times Dial, Authenticate, Retire and Leave were called.
func (w *world) calls() (dials, auths, retires, leaves int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dialed), len(w.pairs), len(w.retired), len(w.left)
}

var peeringKey = client.ObjectKey{Namespace: testLiqoNS, Name: testPeering}

// condition is the condition typ of p, or a failure.
func condition(t *testing.T, p *authv1beta1.Peering, typ string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition: %+v", typ, p.Status.Conditions)
	}
	return c
}

// wantReady fails unless p stands in state with Ready's reason, and the result requeues
// after requeue.
func wantReady(t *testing.T, p *authv1beta1.Peering, res ctrl.Result, state authv1beta1.PeeringState, reason string, requeue time.Duration) {
	t.Helper()
	c := condition(t, p, authv1beta1.ConditionReady)
	if p.Status.State != state || c.Reason != reason {
		t.Errorf("state %s, Ready %s (%s), want %s, %s", p.Status.State, c.Reason, c.Message, state, reason)
	}
	if wantStatus := metav1.ConditionStatus(map[bool]string{true: "True", false: "False"}[state == authv1beta1.PeeringPeered]); c.Status != wantStatus {
		t.Errorf("Ready is %s in state %s", c.Status, state)
	}
	if res.RequeueAfter != requeue {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, requeue)
	}
}

// hasEvent says whether events holds one of type typ and reason.
func hasEvent(events []string, typ, reason string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, typ+" "+reason+" ") {
			return true
		}
	}
	return false
}

func TestPeeringGetsItsFinalizer(t *testing.T) {
	p := peering(nil)
	p.Finalizers = nil
	w := newWorld(t, p)
	_, got, writes, _ := w.reconcile(peeringKey)
	if !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v, want %s", got.Finalizers, Finalizer)
	}
	if writes["update Peering"] != 1 {
		t.Errorf("writes %v, want the finalizer's update", writes)
	}
}

func TestBootstrapSecretMissing(t *testing.T) {
	w := newWorld(t, peering(nil))
	res, p, _, events := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringPending, authv1beta1.ReasonBootstrapSecretMissing, secretRetry)
	if d, a, _, _ := w.calls(); d+a > 0 {
		t.Errorf("dialed %d times and authenticated %d times without a Secret", d, a)
	}
	if !hasEvent(events, corev1.EventTypeNormal, authv1beta1.ReasonBootstrapSecretMissing) {
		t.Errorf("events %v, want the missing Secret's", events)
	}
	if recs, err := cluster.ListTenantRecords(context.Background(), w.base, testLiqoNS); err != nil || len(recs) > 0 {
		t.Errorf("tenant records %v (%v): nothing is claimed without a credential", recs, err)
	}
}

func TestPeeringRunsTheHandshakeOnceAndRetiresTheCredential(t *testing.T) {
	w := newWorld(t, peering(nil))
	w.addSecret(w.cred.kubeconfig)
	res, p, _, events := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, identityRecheck)

	dials, auths, retires, leaves := w.calls()
	if dials != 1 || auths != 1 || retires != 1 || leaves != 0 {
		t.Fatalf("dialed %d, authenticated %d, retired %d, left %d times; want 1, 1, 1, 0", dials, auths, retires, leaves)
	}
	pair := w.pairs[0]
	if pair.Provider != w.dialed[0] || pair.Consumer != w.consumers[0] {
		t.Errorf("the pair authenticated is not the consumer and the provider side Dial returned")
	}
	if pair.Provider.ClusterID != testProvider || pair.Consumer.ClusterID != testSelf || pair.Provider.Namespace != wire.DefaultLiqoNamespace {
		t.Errorf("pair %s -> %s (provider's Liqo namespace %q)", pair.Consumer.ClusterID, pair.Provider.ClusterID, pair.Provider.Namespace)
	}
	if k := w.dialedWith[0]; k.Server != testServer || string(k.CertPEM) != string(w.cred.certPEM) {
		t.Errorf("dialed %s with another credential than the Secret's", k.Server)
	}
	if w.retired[0] != pair.Provider {
		t.Errorf("Retire ran on another side than the provider's the handshake ran with")
	}

	rec := w.record(testProvider)
	if rec == nil || rec.Peering == nil || rec.Peering.Name != testPeering || rec.Peering.UID != string(testUID) {
		t.Fatalf("the record does not name this Peering as the owner: %+v", rec)
	}
	used := rec.ConsumedBootstrap(w.cred.serial)
	if used == nil || used.User != w.cred.user || !used.NotAfter.Equal(w.cred.notAfter) || used.Retired == nil || !used.Retired.Equal(testNow) {
		t.Fatalf("the record's consumed credential is %+v, want %s retired at %v", used, w.cred.user, testNow)
	}

	if c := condition(t, p, authv1beta1.ConditionBootstrapRetired); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonBootstrapRetired {
		t.Errorf("BootstrapRetired %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if c := condition(t, p, authv1beta1.ConditionSlicesReady); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonPeeringNoSlices {
		t.Errorf("SlicesReady %s %s: %s", c.Status, c.Reason, c.Message)
	}
	st := p.Status
	if st.ProviderClusterID != testProvider || st.TenantNamespace != testTenantNS || st.Identity != wire.IdentityName(testProvider) ||
		st.Certificate == nil || st.Certificate.SerialNumber != "c0ffee" {
		t.Errorf("status names provider %q, namespace %q, Identity %q, certificate %+v", st.ProviderClusterID, st.TenantNamespace, st.Identity, st.Certificate)
	}
	if b := st.Bootstrap; b == nil || b.User != w.cred.user || b.Serial != w.cred.serial || b.Retired == nil || !b.Retired.Time.Equal(testNow) {
		t.Errorf("status.bootstrap %+v", b)
	}
	for _, want := range [][2]string{{corev1.EventTypeNormal, authv1beta1.ReasonPeeringAuthenticating}, {corev1.EventTypeNormal, authv1beta1.ReasonBootstrapRetired},
		{corev1.EventTypeNormal, authv1beta1.ReasonPeered}} {
		if !hasEvent(events, want[0], want[1]) {
			t.Errorf("no %s %s Event in %v", want[0], want[1], events)
		}
	}

	// Peered: the next reconcile reads, and neither writes nor runs a step.
	res, p, writes, events := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, identityRecheck)
	if len(writes) > 0 {
		t.Errorf("a reconcile of a peered Peering wrote %v", writes)
	}
	if d, a, r, l := w.calls(); d != 1 || a != 1 || r != 1 || l != 0 {
		t.Errorf("a reconcile of a peered Peering dialed %d, authenticated %d, retired %d, left %d times in all", d, a, r, l)
	}
	if len(events) > 0 {
		t.Errorf("a reconcile of a peered Peering recorded %v", events)
	}
}

func TestConsumedCredentialRunsNoHandshake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(w *world)
	}{
		{name: "used with another provider", record: func(w *world) {
			w.addRecord("cl-elsewhere", func(r *cluster.TenantRecord) {
				r.Consume(cluster.ConsumedBootstrap{User: w.cred.user, Serial: w.cred.serial, NotAfter: w.cred.notAfter}, testNow)
			})
		}},
		{name: "used by this Peering, its Identity deleted since", record: func(w *world) {
			w.addRecord(testProvider, func(r *cluster.TenantRecord) {
				r.Namespace = testTenantNS
				r.Peering = &cluster.RecordedPeering{Name: testPeering, UID: string(testUID)}
				r.Consume(cluster.ConsumedBootstrap{User: w.cred.user, Serial: w.cred.serial, NotAfter: w.cred.notAfter}, testNow)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, peering(nil))
			w.addSecret(w.cred.kubeconfig)
			tc.record(w)
			res, p, _, events := w.reconcile(peeringKey)
			wantReady(t, p, res, authv1beta1.PeeringFailed, authv1beta1.ReasonBootstrapConsumed, 0)
			if d, a, r, _ := w.calls(); d+a+r > 0 {
				t.Errorf("a used credential dialed %d, authenticated %d, retired %d times", d, a, r)
			}
			if !hasEvent(events, corev1.EventTypeWarning, authv1beta1.ReasonBootstrapConsumed) {
				t.Errorf("events %v, want a warning", events)
			}
		})
	}
}

// TestPeeringOlderThanThePinsIsPinned: a peering this Peering made before the consumer
// pinned its tenant namespace on the provider and its proxy (helper-44's F2) is pinned to
// what its handshake can only have used, once, with an Event; what a handshake pinned
// already is left as it is.
func TestPeeringOlderThanThePinsIsPinned(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unpin     func(r *cluster.TenantRecord)
		wantNS    string
		wantProxy string
		noProxy   bool // none pinned
		event     bool
		guess     bool // pinnedByManager
	}{
		{name: "neither pinned", unpin: func(r *cluster.TenantRecord) { r.ProviderTenantNamespace, r.ProxyURL, r.PinnedOnce = "", nil, false },
			wantNS: wire.TenantNamespaceName(testSelf), event: true, guess: true},
		{name: "the proxy only: the handshake's namespace is no guess", unpin: func(r *cluster.TenantRecord) { r.ProxyURL, r.PinnedOnce = nil, false },
			wantNS: wire.TenantNamespaceName(testSelf), event: true},
		{name: "a handshake's pins are kept", unpin: func(r *cluster.TenantRecord) {
			r.ProviderTenantNamespace, r.ProxyURL, r.PinnedOnce = "elsewhere", ptr.To("http://proxy:3128"), false
		},
			wantNS: "elsewhere", wantProxy: "http://proxy:3128"},
		{name: "forgotten by the administrator: never again (helper-47's F1)", unpin: func(r *cluster.TenantRecord) {
			r.ProviderTenantNamespace, r.ProxyURL = "", nil // as cluster.ForgetProxy leaves it
		},
			noProxy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, peering(nil))
			w.addSecret(w.cred.kubeconfig)
			w.reconcile(peeringKey)
			if err := cluster.UpdateTenantRecord(context.Background(), w.base, w.base, testLiqoNS, testProvider, false, func(r *cluster.TenantRecord) error {
				tc.unpin(r)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			res, p, _, events := w.reconcile(peeringKey)
			wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, identityRecheck)
			rec := w.record(testProvider)
			if rec.ProviderTenantNamespace != tc.wantNS || (rec.ProxyURL == nil) != tc.noProxy || rec.PinnedProxy() != tc.wantProxy || !rec.PinnedOnce {
				t.Errorf("pinned namespace %q, proxy %v; want %q, %q", rec.ProviderTenantNamespace, rec.ProxyURL, tc.wantNS, tc.wantProxy)
			}
			if rec.PinnedByManager != tc.guess {
				t.Errorf("pinnedByManager %v, want %v: only a namespace the manager pinned is its guess", rec.PinnedByManager, tc.guess)
			}
			if got := hasEvent(events, corev1.EventTypeNormal, authv1beta1.ReasonPeeringPinned); got != tc.event {
				t.Errorf("a %s Event: %v, want %v (%v)", authv1beta1.ReasonPeeringPinned, got, tc.event, events)
			}
			if _, _, writes, events := w.reconcile(peeringKey); len(writes) > 0 || len(events) > 0 {
				t.Errorf("the reconcile after wrote %v, recorded %v", writes, events)
			}
		})
	}
}

func TestProviderPinMismatchClaimsNothing(t *testing.T) {
	w := newWorld(t, peering(func(p *authv1beta1.Peering) { p.Spec.ProviderClusterID = "cl-other" }))
	w.addSecret(w.cred.kubeconfig)
	res, p, _, _ := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringFailed, authv1beta1.ReasonProviderMismatch, 0)
	if msg := condition(t, p, authv1beta1.ConditionReady).Message; !strings.Contains(msg, `reaches cluster "cl-provider"`) || !strings.Contains(msg, `pins "cl-other"`) {
		t.Errorf("message %q", msg)
	}
	if _, a, r, _ := w.calls(); a+r > 0 {
		t.Errorf("authenticated %d, retired %d times with a provider the Peering does not pin", a, r)
	}
	if rec := w.record(testProvider); rec != nil {
		t.Errorf("the provider the Peering does not pin got a record: %+v", rec)
	}
	if p.Status.ProviderClusterID != "" {
		t.Errorf("status names provider %q", p.Status.ProviderClusterID)
	}
}

func TestProviderOfAnotherPeering(t *testing.T) {
	older := peering(func(p *authv1beta1.Peering) { p.Name, p.UID = "older", "older-uid" })
	for _, tc := range []struct {
		name string
		objs []client.Object
		// taken says whether this Peering takes the provider over.
		taken bool
	}{
		{name: "the other Peering is live", objs: []client.Object{older}},
		{name: "the other Peering is gone", taken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, append(tc.objs, peering(nil))...)
			w.addSecret(w.cred.kubeconfig)
			w.addRecord(testProvider, func(r *cluster.TenantRecord) { r.Peering = &cluster.RecordedPeering{Name: "older", UID: "older-uid"} })
			res, p, _, _ := w.reconcile(peeringKey)
			rec := w.record(testProvider)
			_, auths, _, _ := w.calls()
			if tc.taken {
				wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, identityRecheck)
				if auths != 1 || rec.Peering.UID != string(testUID) {
					t.Errorf("authenticated %d times, record owned by %+v", auths, rec.Peering)
				}
				return
			}
			wantReady(t, p, res, authv1beta1.PeeringFailed, authv1beta1.ReasonProviderPeeredElsewhere, 0)
			if auths != 0 {
				t.Errorf("authenticated %d times with a provider another Peering owns", auths)
			}
			if rec.Peering.Name != "older" || rec.Peering.UID != "older-uid" {
				t.Errorf("the record's owner became %+v", rec.Peering)
			}
			if msg := condition(t, p, authv1beta1.ConditionReady).Message; !strings.Contains(msg, "Peering liqo/older already peers") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// refusal is the provider's refusal of a request of peering user cred, as the handshake
// words it.
func refusal(cred *credential) error {
	s := &handshake.Side{Scope: handshake.Remote, Config: &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: cred.certPEM}}}
	s.DetectPeeringUser()
	return s.Explain(apierrors.NewForbidden(schema.GroupResource{Group: authv1beta1.GroupVersion.Group, Resource: "tenants"}, testSelf, errors.New("RBAC: access denied")), "creating the Tenant")
}

func TestHandshakeErrorsClassified(t *testing.T) {
	unreachable := fmt.Errorf("(remote) reading its cluster ID: %w", &url.Error{Op: "Get", URL: testServer,
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	for _, tc := range []struct {
		name    string
		err     func(w *world) error
		state   authv1beta1.PeeringState
		reason  string
		requeue time.Duration
	}{
		{name: "approval pending", err: func(*world) error { return fmt.Errorf("(remote) the Tenant: %w", handshake.ErrApprovalPending) },
			state: authv1beta1.PeeringWaitingForApproval, reason: authv1beta1.ReasonPeeringWaitingForApproval, requeue: approvalRecheck},
		{name: "denied", err: func(*world) error { return fmt.Errorf("(remote) the Tenant: %w", handshake.ErrDenied) },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonPeeringDenied, requeue: deniedRecheck},
		{name: "peering user refused", err: func(w *world) error { return refusal(w.cred) },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonBootstrapCredentialRefused},
		{name: "provider unreachable", err: func(*world) error { return unreachable },
			state: authv1beta1.PeeringPending, reason: authv1beta1.ReasonProviderUnreachable, requeue: providerRetry},
		{name: "timed out", err: func(*world) error { return fmt.Errorf("waiting for the Tenant: %w", context.DeadlineExceeded) },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonHandshakeFailed, requeue: providerRetry},
		{name: "anything else", err: func(*world) error { return errors.New("(remote) creating the Tenant: conflict") },
			state: authv1beta1.PeeringFailed, reason: authv1beta1.ReasonHandshakeFailed, requeue: providerRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, peering(nil))
			w.addSecret(w.cred.kubeconfig)
			err := tc.err(w)
			w.authenticate = func(context.Context, *handshake.Pair) (*authv1beta1.Identity, error) { return nil, err }
			res, p, _, _ := w.reconcile(peeringKey)
			wantReady(t, p, res, tc.state, tc.reason, tc.requeue)
			if msg := condition(t, p, authv1beta1.ConditionReady).Message; !strings.Contains(msg, authv1beta1.EscapeText(err.Error())) {
				t.Errorf("message %q does not say %q", msg, err)
			}
			if _, a, r, _ := w.calls(); a != 1 || r != 0 {
				t.Errorf("authenticated %d, retired %d times", a, r)
			}
			rec := w.record(testProvider)
			if rec == nil || rec.Peering == nil || rec.Peering.UID != string(testUID) {
				t.Errorf("the claim is not kept: %+v", rec)
			} else if len(rec.Peering.Consumed) > 0 {
				t.Errorf("a handshake that failed consumed %+v", rec.Peering.Consumed)
			}
		})
	}
}

// deleted is the Peering, deleted, whose status names a provider (a status writer may
// have written it) other than the one its record names.
func deleted() *authv1beta1.Peering {
	return peering(func(p *authv1beta1.Peering) {
		p.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
		p.Status.ProviderClusterID, p.Status.State = "cl-forged", authv1beta1.PeeringPeered
	})
}

// owned records that this Peering owns the peering with testProvider.
func owned(r *cluster.TenantRecord) {
	r.Namespace = testTenantNS
	r.Peering = &cluster.RecordedPeering{Name: testPeering, UID: string(testUID)}
}

func TestDeletedPeeringLeavesTheProviderItsRecordNames(t *testing.T) {
	w := newWorld(t, deleted())
	w.addRecord(testProvider, owned)
	w.addRecord("cl-forged", func(r *cluster.TenantRecord) { r.Namespace = "liqo-tenant-cl-forged" })
	res, p, _, _ := w.reconcile(peeringKey)
	if p != nil {
		t.Fatalf("the Peering is still there, finalizers %v", p.Finalizers)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeue after %v", res.RequeueAfter)
	}
	if _, _, _, l := w.calls(); l != 1 || w.left[0] != testProvider {
		t.Fatalf("left %v, want %q (the record's) once", w.left, testProvider)
	}
	if w.leftFrom[0] != w.consumers[0] || w.leftFrom[0].Scope != handshake.Local {
		t.Errorf("Leave did not run with the consumer side")
	}
	if rec := w.record(testProvider); rec.Peering != nil && (rec.Peering.Name != "" || rec.Peering.UID != "") {
		t.Errorf("the claim is kept after leaving: %+v", rec.Peering)
	}
	if rec := w.record("cl-forged"); rec.Peering != nil {
		t.Errorf("the record of the provider the status names changed: %+v", rec.Peering)
	}
}

func TestLeaveFailureKeepsTheFinalizer(t *testing.T) {
	w := newWorld(t, deleted())
	w.addRecord(testProvider, owned)
	w.leaveErr = errors.New("(remote) cannot reach the API server")
	res, p, _, events := w.reconcile(peeringKey)
	if p == nil || !slices.Contains(p.Finalizers, Finalizer) {
		t.Fatalf("the finalizer is gone though leaving failed")
	}
	wantReady(t, p, res, authv1beta1.PeeringLeaving, authv1beta1.ReasonPeeringLeaveFailed, leaveRetry)
	if !hasEvent(events, corev1.EventTypeWarning, authv1beta1.ReasonPeeringLeaveFailed) {
		t.Errorf("events %v, want a LeaveFailed warning", events)
	}
	if rec := w.record(testProvider); rec.Peering == nil || rec.Peering.UID != string(testUID) {
		t.Errorf("the claim is cleared though leaving failed: %+v", rec.Peering)
	}
}

func TestDeletedPeeringThatOwnsNothingLeavesNothing(t *testing.T) {
	w := newWorld(t, deleted())
	w.addRecord(testProvider, func(r *cluster.TenantRecord) { r.Peering = &cluster.RecordedPeering{Name: "older", UID: "older-uid"} })
	_, p, _, _ := w.reconcile(peeringKey)
	if p != nil {
		t.Fatalf("the Peering is still there, finalizers %v", p.Finalizers)
	}
	if _, _, _, l := w.calls(); l != 0 {
		t.Errorf("left %v, though the Peering owns no peering", w.left)
	}
	if rec := w.record(testProvider); rec.Peering.UID != "older-uid" {
		t.Errorf("another Peering's claim changed: %+v", rec.Peering)
	}
}

func TestPeeringOutsideTheLiqoNamespaceIsIgnored(t *testing.T) {
	p := peering(func(p *authv1beta1.Peering) { p.Namespace, p.Finalizers = "default", nil })
	s := bootstrapSecret(nil)
	s.Namespace = "default"
	w := newWorld(t, p, s)
	key := client.ObjectKey{Namespace: "default", Name: testPeering}
	res, got, writes, events := w.reconcile(key)
	if len(writes) > 0 || len(events) > 0 || res != (ctrl.Result{}) {
		t.Errorf("a Peering outside the Liqo namespace got writes %v, events %v, result %+v", writes, events, res)
	}
	if len(got.Finalizers) > 0 || got.Status.State != "" {
		t.Errorf("a Peering outside the Liqo namespace got finalizers %v, state %q", got.Finalizers, got.Status.State)
	}
	if d, a, _, _ := w.calls(); d+a > 0 {
		t.Errorf("dialed %d, authenticated %d times", d, a)
	}
}

// slice is ResourceSlice name of the tenant namespace, made by Peering madeBy ("": none),
// asking for cpu.
func slice(name, madeBy, cpu string) *authv1beta1.ResourceSlice {
	rs := handshake.ForgeSlice(testTenantNS, name, testProvider, "", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)})
	if madeBy != "" {
		rs.Labels[wire.PeeringLabel] = madeBy
	}
	return rs
}

func TestPeeringSlices(t *testing.T) {
	w := newWorld(t, peering(func(p *authv1beta1.Peering) {
		p.Spec.ResourceSlices = []authv1beta1.PeeringSlice{
			{Name: "a", Class: "gold", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			{Name: "b", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			{Name: "c", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		}
	}), slice("old", testPeering, "1"), slice("b", "", "5"), slice("c", testPeering, "3"), slice("theirs", "other-peering", "1"),
		// Labelled as the Peering's by a slice writer: the record does not list it.
		slice("forged", testPeering, "1"))
	w.addSecret(w.cred.kubeconfig)
	// The slices the Peering made earlier are the record's, never their label's.
	if err := cluster.UpdateTenantRecord(context.Background(), w.base, w.base, testLiqoNS, testProvider, true, func(r *cluster.TenantRecord) error {
		r.Namespace, r.Peering = testTenantNS, &cluster.RecordedPeering{Slices: []string{"old", "c"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, p, _, events := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, deniedRecheck)

	get := func(name string) *authv1beta1.ResourceSlice {
		rs := &authv1beta1.ResourceSlice{}
		if err := w.base.Get(context.Background(), client.ObjectKey{Namespace: testTenantNS, Name: name}, rs); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return rs
	}
	cpu := func(rs *authv1beta1.ResourceSlice) string {
		q := rs.Spec.Resources[corev1.ResourceCPU]
		return q.String()
	}
	if a := get("a"); a == nil || a.Labels[wire.PeeringLabel] != testPeering || a.Labels[wire.RemoteClusterIDLabel] != testProvider ||
		a.Labels[wire.ReplicationRequestedLabel] != "true" || a.Spec.Class != "gold" || cpu(a) != "1" {
		t.Errorf("slice a is %+v", a)
	}
	if c := get("c"); c == nil || cpu(c) != "4" {
		t.Errorf("slice c, made by the Peering, was not changed to the resources listed: %+v", c)
	}
	if get("old") != nil {
		t.Errorf("slice old, made by the Peering and no longer listed, is still there")
	}
	if b := get("b"); b == nil || cpu(b) != "5" || b.Labels[wire.PeeringLabel] != "" {
		t.Errorf("slice b, not made by the Peering, was changed: %+v", b)
	}
	if get("theirs") == nil {
		t.Errorf("another Peering's slice was deleted")
	}
	if get("forged") == nil {
		t.Errorf("a slice a slice writer labelled as the Peering's was deleted: the label says nothing")
	}
	c := condition(t, p, authv1beta1.ConditionSlicesReady)
	if c.Status != metav1.ConditionFalse || c.Reason != authv1beta1.ReasonPeeringSliceDenied || !strings.Contains(c.Message, "b: a ResourceSlice of that name, not made by this Peering") {
		t.Errorf("SlicesReady %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if !hasEvent(events, corev1.EventTypeWarning, authv1beta1.ReasonPeeringSliceDenied) {
		t.Errorf("events %v, want the slice denied", events)
	}
	if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "no longer listed removed: old") }) {
		t.Errorf("events %v, want the removal of old", events)
	}
}

func TestRetireFailureIsRetriedWithTheSecret(t *testing.T) {
	w := newWorld(t, peering(nil))
	w.addSecret(w.cred.kubeconfig)
	w.retireErr = errors.New("(remote) the peering user may still do something")
	res, p, _, events := w.reconcile(peeringKey)
	wantReady(t, p, res, authv1beta1.PeeringPeered, authv1beta1.ReasonPeered, identityRecheck)
	if c := condition(t, p, authv1beta1.ConditionBootstrapRetired); c.Status != metav1.ConditionFalse || c.Reason != authv1beta1.ReasonBootstrapNotRetired ||
		!strings.Contains(c.Message, "may still do something") {
		t.Errorf("BootstrapRetired %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if !hasEvent(events, corev1.EventTypeWarning, authv1beta1.ReasonBootstrapNotRetired) {
		t.Errorf("events %v, want a NotRetired warning", events)
	}
	if d, a, r, _ := w.calls(); d != 1 || a != 1 || r != 1 {
		t.Errorf("dialed %d, authenticated %d, retired %d times in one reconcile; want once each", d, a, r)
	}
	if used := w.record(testProvider).ConsumedBootstrap(w.cred.serial); used == nil || used.Retired != nil {
		t.Fatalf("the record's consumed credential is %+v, want it used and not retired", used)
	}

	// The next reconcile retires it with the Secret's kubeconfig, and runs no handshake.
	w.retireErr = nil
	_, p, _, _ = w.reconcile(peeringKey)
	d, a, r, _ := w.calls()
	if a != 1 || r != 2 {
		t.Fatalf("authenticated %d, retired %d times in all; want 1, 2", a, r)
	}
	if pr := w.retired[1]; pr != w.dialed[d-1] || pr.ClusterID != testProvider || string(w.dialedWith[d-1].CertPEM) != string(w.cred.certPEM) {
		t.Errorf("the second Retire ran on %q, not on the provider dialed with the Secret's credential", pr.ClusterID)
	}
	if c := condition(t, p, authv1beta1.ConditionBootstrapRetired); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonBootstrapRetired {
		t.Errorf("BootstrapRetired %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if used := w.record(testProvider).ConsumedBootstrap(w.cred.serial); used == nil || used.Retired == nil {
		t.Errorf("the record's consumed credential is %+v, want it retired", used)
	}
}
