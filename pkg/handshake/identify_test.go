package handshake

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestIdentifyAsAPeeringUser: a peering user, who may read the cluster-ID ConfigMap only
// by name, reads it by name at once, without the list it would be refused first (a round
// trip of its handshake); other credentials list it by its label.
func TestIdentifyAsAPeeringUser(t *testing.T) {
	for _, tc := range []struct {
		name      string
		peer      bool
		wantLists int
	}{
		{"a peering user", true, 0},
		{"the administrator", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lists := 0
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cluster.ForgeClusterIDConfigMap("liqo", "cl-provider")).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists++
					return cl.List(ctx, list, opts...)
				}}).Build()
			s := &Side{Scope: Remote, Client: c, Namespace: "liqo", Report: &lines{}}
			if tc.peer {
				s.peeringUser = &peeringUserCert{User: "liqo-peer-user-cl-consumer-1", NotAfter: time.Now().Add(time.Hour)}
			}
			if err := s.Identify(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s.ClusterID != "cl-provider" || lists != tc.wantLists {
				t.Fatalf("cluster ID %q after %d lists, want cl-provider after %d", s.ClusterID, lists, tc.wantLists)
			}
		})
	}
}
