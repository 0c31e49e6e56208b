package noncecreator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
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
	liqoNS   = "liqo"
	consumer = "cl-consumer"
	tenantNS = "liqo-tenant-cl-consumer"
	ttl      = time.Hour
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// nonceSecret is the empty nonce Secret of the consumer in its tenant namespace, created
// a minute ago.
func nonceSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.NonceSecretName, Namespace: tenantNS, UID: "nonce-uid",
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)), Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: consumer}}}
}

// env is a Reconciler on a fake provider holding the consumer's tenant namespace and its
// record, and the Secret writes it made.
type env struct {
	c        client.WithWatch
	r        *Reconciler
	recorder *events.FakeRecorder
	patches  int
	// conflict makes every patch fail with a conflict, as the API server does when the
	// Secret changed since it was read.
	conflict bool
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := &env{recorder: events.NewFakeRecorder(10)}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, UID: "ns-uid", Labels: cluster.TenantNamespaceLabels(consumer)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", UID: "ns-uid-2", Labels: cluster.TenantNamespaceLabels(consumer)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: liqoNS}})
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			e.patches++
			if e.conflict {
				return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			t.Error("the Reconciler updates a Secret: it only patches")
			return nil
		},
	}).Build()
	if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, consumer, true, func(r *cluster.TenantRecord) error {
		r.Namespace, r.NamespaceUID = tenantNS, "ns-uid"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.r = &Reconciler{Client: e.c, Placement: placement.Placement{Cache: e.c, Live: e.c, LiqoNamespace: liqoNS}, Recorder: e.recorder,
		NonceTTL: ttl, Now: func() time.Time { return now }}
	return e
}

// reconcile runs one Reconcile of s and returns it as left, with the Events recorded.
func (e *env) reconcile(t *testing.T, s *corev1.Secret) (*corev1.Secret, []string) {
	t.Helper()
	e.patches = 0
	got := &corev1.Secret{}
	if _, _, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return got, controllertest.Events(e.recorder)
}

func hasEvent(evs []string, evType, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, evType+" "+reason+" ") })
}

// TestFillsEmptyNonce: an empty nonce Secret in the recorded tenant namespace of the
// cluster it names is filled once with a canonical nonce and stamped with its issue time;
// reconciled again, it is not refilled.
func TestFillsEmptyNonce(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string][]byte
	}{{"no data", nil}, {"an empty nonce", map[string][]byte{wire.NonceField: {}}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := nonceSecret()
			s.Data = tc.data
			e := newEnv(t, s)
			got, evs := e.reconcile(t, s)
			nonce := string(got.Data[wire.NonceField])
			if err := authn.CheckNonce(nonce); err != nil {
				t.Fatalf("nonce %q: %v", nonce, err)
			}
			if at := got.Annotations[wire.NonceIssuedAtAnnotation]; at != now.Format(time.RFC3339) {
				t.Errorf("issued at %q, want %q", at, now.Format(time.RFC3339))
			}
			if !hasEvent(evs, corev1.EventTypeNormal, authv1beta1.ReasonNonceGenerated) || e.patches != 1 {
				t.Errorf("Events %v, %d patches, want one %s and one patch", evs, e.patches, authv1beta1.ReasonNonceGenerated)
			}
			again, evs := e.reconcile(t, s)
			if string(again.Data[wire.NonceField]) != nonce || e.patches != 0 || len(evs) != 0 {
				t.Errorf("reconciled again: nonce %q (was %q), %d patches, Events %v", again.Data[wire.NonceField], nonce, e.patches, evs)
			}
		})
	}
}

// TestDoesNotFill: a nonce Secret that is filled already, too old, misplaced, misnamed or
// being deleted is not filled; a Secret filled by someone else without an issue time gets
// its creation time as the issue time, and keeps its nonce.
func TestDoesNotFill(t *testing.T) {
	const theirs = "someone's nonce"
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Secret) []client.Object
		// wantNonce is the nonce the Secret holds after, wantIssuedAt its issue time.
		wantNonce, wantIssuedAt string
		wantEvent               string
		wantPatches             int
	}{
		{name: "filled and stamped", mutate: func(s *corev1.Secret) []client.Object {
			s.Data = map[string][]byte{wire.NonceField: []byte(theirs)}
			s.Annotations = map[string]string{wire.NonceIssuedAtAnnotation: "2026-01-01T00:00:00Z"}
			return nil
		}, wantNonce: theirs, wantIssuedAt: "2026-01-01T00:00:00Z"},
		{name: "filled by someone else without an issue time", mutate: func(s *corev1.Secret) []client.Object {
			s.Data = map[string][]byte{wire.NonceField: []byte(theirs)}
			return nil
		}, wantNonce: theirs, wantIssuedAt: now.Add(-time.Minute).Format(time.RFC3339), wantPatches: 1},
		{name: "created a TTL ago", mutate: func(s *corev1.Secret) []client.Object {
			s.CreationTimestamp = metav1.NewTime(now.Add(-ttl))
			return nil
		}, wantEvent: "Warning " + authv1beta1.ReasonNonceSecretTooOld},
		{name: "in a namespace labelled for the consumer but not recorded", mutate: func(s *corev1.Secret) []client.Object {
			s.Namespace = "elsewhere"
			return nil
		}, wantEvent: "Warning NonceOutsideTenantNamespace"},
		{name: "labelled for another cluster", mutate: func(s *corev1.Secret) []client.Object {
			s.Labels[wire.RemoteClusterIDLabel] = "cl-other"
			return nil
		}, wantEvent: "Warning NonceOutsideTenantNamespace"},
		{name: "naming no cluster", mutate: func(s *corev1.Secret) []client.Object {
			delete(s.Labels, wire.RemoteClusterIDLabel)
			return nil
		}, wantEvent: "Warning NonceOutsideTenantNamespace"},
		{name: "named otherwise", mutate: func(s *corev1.Secret) []client.Object {
			s.Name = "another-nonce"
			return nil
		}},
		{name: "being deleted", mutate: func(s *corev1.Secret) []client.Object {
			s.DeletionTimestamp, s.Finalizers = &metav1.Time{Time: now}, []string{"test/hold"}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := nonceSecret()
			objs := append(tc.mutate(s), s)
			e := newEnv(t, objs...)
			got, evs := e.reconcile(t, s)
			if n := string(got.Data[wire.NonceField]); n != tc.wantNonce {
				t.Errorf("nonce %q, want %q", n, tc.wantNonce)
			}
			if at := got.Annotations[wire.NonceIssuedAtAnnotation]; at != tc.wantIssuedAt {
				t.Errorf("issued at %q, want %q", at, tc.wantIssuedAt)
			}
			if e.patches != tc.wantPatches {
				t.Errorf("%d patches, want %d", e.patches, tc.wantPatches)
			}
			var want []string
			if tc.wantEvent != "" {
				want = []string{tc.wantEvent}
			}
			if len(evs) != len(want) || (len(want) == 1 && !strings.HasPrefix(evs[0], want[0]+" ")) {
				t.Errorf("Events %v, want %v", evs, want)
			}
		})
	}
}

// TestConflictIsNotAnError: a fill that loses the race (the Secret changed since it was
// read) is no error and announces nothing: the Secret's change brings it back.
func TestConflictIsNotAnError(t *testing.T) {
	s := nonceSecret()
	e := newEnv(t, s)
	e.conflict = true
	got, evs := e.reconcile(t, s)
	if len(got.Data[wire.NonceField]) != 0 || e.patches != 1 || len(evs) != 0 {
		t.Errorf("nonce %q, %d patches, Events %v, want the one patch refused and nothing announced", got.Data[wire.NonceField], e.patches, evs)
	}
}
