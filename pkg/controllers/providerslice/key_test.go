package providerslice

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// TestKeyReadOnlyOnceTheTenantIsRead: the provider's key verifies the Tenant's seal and
// nothing before it; a Reconciler without a key denies a slice that the checks before the
// Tenant's refuse (an invalid consumer cluster ID), as it always did, instead of panicking.
func TestKeyReadOnlyOnceTheTenantIsRead(t *testing.T) {
	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-x", Name: "slice-1", UID: "u",
		Labels: map[string]string{wire.ReplicationStatusLabel: "true"}},
		Spec: authv1beta1.ResourceSliceSpec{ConsumerClusterID: ptr.To(authv1beta1.ClusterID("NOT a valid ID!"))}}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&authv1beta1.ResourceSlice{}).WithObjects(rs)
	if err := issuer.IndexByOwner(context.Background(), controllertest.Indexer{B: b}, wire.SliceAnnotation); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	r := &Reconciler{Client: c, APIReader: c, Issuer: &issuer.Issuer{Client: c, APIReader: c}, Placement: placement.Placement{Cache: c, LiqoNamespace: "liqo"}, Recorder: events.NewFakeRecorder(10),
		ClusterID: "provider-x", Now: func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Reconcile panicked on a slice with an invalid cluster ID (e10b6ec denies it without reading Key): %v", p)
		}
	}()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}); err != nil {
		t.Fatal(err)
	}
	got := &authv1beta1.ResourceSlice{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rs), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) == 0 || got.Status.Conditions[0].Status != authv1beta1.ResourceSliceDenied {
		t.Fatalf("conditions %+v; want Authentication denied", got.Status.Conditions)
	}
}
