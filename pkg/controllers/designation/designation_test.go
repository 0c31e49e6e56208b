package designation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Characterisation of Reconcile's decisions, run on the code before and after the split.
func TestReconcileDecisions(t *testing.T) {
	const remote, liqoNS = "cl-remote", "liqo"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	base := func(mut func(*corev1.Namespace)) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(remote), UID: "ns-uid",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			Labels:            map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: remote},
			Annotations:       map[string]string{wire.CreatedByAnnotation: "alice"}}}
		if mut != nil {
			mut(ns)
		}
		return ns
	}
	errBoom := errors.New("boom")
	cases := []struct {
		name       string
		ns         *corev1.Namespace
		allowed    bool
		sarErr     error
		liveErr    error
		wantErr    string
		wantResult ctrl.Result
		wantEvent  string
		wantRecord bool
	}{
		{name: "allowed", ns: base(nil), allowed: true, wantEvent: "Normal", wantRecord: true},
		{name: "denied", ns: base(nil), wantEvent: "Warning TenantNamespaceNotDesignated"},
		{name: "no creator", ns: base(func(n *corev1.Namespace) { delete(n.Annotations, wire.CreatedByAnnotation) }), allowed: true},
		{name: "empty creator", ns: base(func(n *corev1.Namespace) { n.Annotations[wire.CreatedByAnnotation] = "" }), allowed: true},
		{name: "bad groups", ns: base(func(n *corev1.Namespace) { n.Annotations[wire.CreatedByGroupsAnnotation] = "\\" }), allowed: true, wantEvent: "Warning TenantNamespaceNotDesignated"},
		{name: "wrong name", ns: base(func(n *corev1.Namespace) { n.Labels[wire.RemoteClusterIDLabel] = "cl-other" }), allowed: true},
		{name: "no tenant label", ns: base(func(n *corev1.Namespace) { delete(n.Labels, wire.TenantNamespaceLabel) }), allowed: true},
		{name: "young", ns: base(func(n *corev1.Namespace) { n.CreationTimestamp = metav1.NewTime(now.Add(-time.Second)) }), allowed: true, wantResult: ctrl.Result{RequeueAfter: time.Second}},
		{name: "sar error", ns: base(nil), sarErr: errBoom, wantErr: "asking whether \"alice\" may make tenant records: boom"},
		{name: "live error", ns: base(nil), allowed: true, liveErr: errBoom, wantErr: "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sars int
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.ns).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
						sars++
						if tc.sarErr != nil {
							return tc.sarErr
						}
						if sar.Spec.User != "alice" || sar.Spec.ResourceAttributes.Namespace != liqoNS {
							t.Errorf("SAR %+v", sar.Spec)
						}
						sar.Status.Allowed = tc.allowed
						return nil
					}
					return cl.Create(ctx, obj, opts...)
				}}).Build()
			live := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.liveErr != nil {
						return tc.liveErr
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Live: live, LiqoNamespace: liqoNS, Recorder: rec, Now: func() time.Time { return now }}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: tc.ns.Name}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && !errors.Is(err, errBoom) {
				t.Fatalf("err %v does not wrap boom", err)
			}
			if res != tc.wantResult {
				t.Fatalf("result = %+v, want %+v", res, tc.wantResult)
			}
			var ev string
			select {
			case ev = <-rec.Events:
			default:
			}
			if !strings.HasPrefix(ev, tc.wantEvent) || tc.wantEvent == "" && ev != "" {
				t.Fatalf("event = %q, want prefix %q", ev, tc.wantEvent)
			}
			got, err := cluster.GetTenantRecord(context.Background(), c, liqoNS, remote)
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil && got.Namespace == tc.ns.Name) != tc.wantRecord {
				t.Fatalf("record = %+v, want recorded %v", got, tc.wantRecord)
			}
		})
	}
}
