package integration

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/restmapper"
)

// TestBuiltinMappingsAreTheServers: every kind the mapper answers without discovery maps
// to exactly what the API server's own discovery says (resource, version, scope).
func TestBuiltinMappingsAreTheServers(t *testing.T) {
	cp := testenv.New(t, "discovery")[0]
	hc, err := rest.HTTPClientFor(cp.Config)
	require.NoError(t, err)
	discovered, err := apiutil.NewDynamicRESTMapper(cp.Config, hc)
	require.NoError(t, err)
	m, err := restmapper.New(cp.Config, hc)
	require.NoError(t, err)
	for _, gvk := range restmapper.BuiltinKinds() {
		want, err := discovered.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "the API server serves %s", gvk)
		got, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err)
		require.Equal(t, want.Resource, got.Resource, gvk.String())
		require.Equal(t, want.Scope.Name(), got.Scope.Name(), gvk.String())
		// Without a version, the server's preferred one is the one listed.
		pref, err := discovered.RESTMapping(gvk.GroupKind())
		require.NoError(t, err)
		require.Equal(t, gvk, pref.GroupVersionKind, "the listed version is the preferred one")
	}
}
