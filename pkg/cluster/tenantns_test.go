package cluster

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestEnsureTenantNamespaceReading: a caller's read runs beside the checks of a recorded
// tenant namespace, and counts (ReadIn) only when that namespace checked out and is the
// one returned: not in a namespace made now (nothing to read), nor in one deleted and made
// again since it was recorded, which is adopted instead.
func TestEnsureTenantNamespaceReading(t *testing.T) {
	ctx := context.Background()
	const liqoNS, remote = wire.DefaultLiqoNamespace, "cl-remote"
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	var mu sync.Mutex
	var readIn []string
	read := func(_ context.Context, ns string) {
		mu.Lock()
		defer mu.Unlock()
		readIn = append(readIn, ns)
	}
	for _, tc := range []struct {
		name        string
		before      func(t *testing.T)
		adopt       bool
		wantRead    bool
		wantCreated bool
		wantAdopted bool
	}{
		{name: "a namespace made now", wantCreated: true},
		{name: "the recorded namespace", wantRead: true},
		{name: "the recorded namespace, deleted and made again", adopt: true, wantAdopted: true, before: func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(remote)}}
			if err := c.Delete(ctx, ns); err != nil {
				t.Fatal(err)
			}
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(remote), UID: types.UID("made-again"), Labels: TenantNamespaceLabels(remote)}}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the adopted namespace, recorded since", wantRead: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			readIn = nil
			tn, err := EnsureTenantNamespaceReading(ctx, c, liqoNS, remote, tc.adopt, read)
			if err != nil {
				t.Fatal(err)
			}
			if tn.ReadIn != tc.wantRead || tn.Created != tc.wantCreated || tn.Adopted != tc.wantAdopted {
				t.Fatalf("ReadIn, Created, Adopted = %v, %v, %v; want %v, %v, %v", tn.ReadIn, tn.Created, tn.Adopted, tc.wantRead, tc.wantCreated, tc.wantAdopted)
			}
			if tc.wantRead && (len(readIn) != 1 || readIn[0] != tn.Name) {
				t.Fatalf("read in %v, want once in %s", readIn, tn.Name)
			}
			if tc.wantCreated && len(readIn) != 0 {
				t.Fatalf("read in %v: nothing is in a namespace made now", readIn)
			}
		})
	}
}
