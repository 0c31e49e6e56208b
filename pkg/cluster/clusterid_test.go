package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestEnsureClusterIDLosesTheFillRaceGracefully: two replicas of the release manifest fill
// its empty cluster-ID ConfigMap at the same time; the one whose update conflicts takes the
// other's ID instead of failing (which restarted its Pod), unless it was asked for another.
func TestEnsureClusterIDLosesTheFillRaceGracefully(t *testing.T) {
	const theirs = "cl-theirs"
	cases := []struct {
		name, want string
		wantID     string
		wantErr    bool
	}{
		{name: "random ID", wantID: theirs},
		{name: "the same ID asked", want: theirs, wantID: theirs},
		{name: "another ID asked", want: "cl-mine", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := wire.DefaultLiqoNamespace
			raced := false
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ForgeClusterIDConfigMap(ns, "")).
				WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if raced {
						return c.Update(ctx, obj, opts...)
					}
					raced = true
					// The other replica fills it first.
					other := ForgeClusterIDConfigMap(ns, theirs)
					var cur corev1.ConfigMap
					require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(other), &cur))
					cur.Data = other.Data
					require.NoError(t, c.Update(ctx, &cur))
					return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, other.Name, nil)
				}}).Build()
			id, created, err := EnsureClusterID(context.Background(), c, ns, tc.want)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantID, id)
			assert.False(t, created, "the other replica created it")
		})
	}
}

// TestGetClusterIDByNameWantsTheLabel: what a peering user reads by name is the cluster's ID
// only when it carries the cluster-ID label, as GetClusterID's list and EnsureClusterID
// require (helper-14): an unlabelled ConfigMap of that name, which anyone who may create
// ConfigMaps in the Liqo namespace could have made, names no cluster.
func TestGetClusterIDByNameWantsTheLabel(t *testing.T) {
	ns := wire.DefaultLiqoNamespace
	unlabelled := ForgeClusterIDConfigMap(ns, "cl-planted")
	unlabelled.Labels = map[string]string{"app.kubernetes.io/managed-by": "someone"}
	wrongValue := ForgeClusterIDConfigMap(ns, "cl-planted")
	wrongValue.Labels[wire.ClusterIDLabelKey] = "something-else"
	for _, tc := range []struct {
		name    string
		objs    []client.Object
		wantID  string
		wantErr string
	}{
		{"labelled", []client.Object{ForgeClusterIDConfigMap(ns, "cl-provider")}, "cl-provider", ""},
		{"none", nil, "", "no ConfigMap"},
		{"no label", []client.Object{unlabelled}, "", "is not labelled"},
		{"another value", []client.Object{wrongValue}, "", "is not labelled"},
		{"labelled, empty", []client.Object{ForgeClusterIDConfigMap(ns, "")}, "", "holds no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objs...).Build()
			id, err := GetClusterIDByName(context.Background(), c, ns)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.Empty(t, id)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantID, id)
		})
	}
}
