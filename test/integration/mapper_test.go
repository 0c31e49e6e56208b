package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// TestBuiltinKindsAsServed holds liqoctl's mapper to a real API server's discovery: each
// kind it maps without asking (cli.BuiltinKinds) maps to the resource and scope the API
// server serves it at, as controller-runtime's mapper, which asks, finds them; this
// project's CRDs are not found before liqoctl install and are found after it, through the
// same mapper (a command that installs, then uses them).
func TestBuiltinKindsAsServed(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "mapper")[0]
	hc, err := rest.HTTPClientFor(cp.Config)
	require.NoError(t, err)
	mapper, err := cli.NewRESTMapper(cp.Config, hc)
	require.NoError(t, err)
	asked, err := apiutil.NewDynamicRESTMapper(cp.Config, hc)
	require.NoError(t, err)

	kinds := cli.BuiltinKinds()
	require.NotEmpty(t, kinds)
	for _, gvk := range kinds {
		got, gotErr := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, gotErr, gvk)
		want, wantErr := asked.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, wantErr, "%s: the API server does not serve it", gvk)
		assert.Equal(t, want.Resource, got.Resource, gvk)
		assert.Equal(t, want.Scope.Name(), got.Scope.Name(), gvk)
	}

	tenant := authv1beta1.GroupVersion.WithKind("Tenant")
	_, err = mapper.RESTMapping(tenant.GroupKind(), tenant.Version)
	require.True(t, meta.IsNoMatchError(err), "before liqoctl install: %v", err)

	mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", "cl-mapper")
	for _, kind := range []string{"Tenant", "Identity", "ResourceSlice", "Renew", "Peering"} {
		gvk := authv1beta1.GroupVersion.WithKind(kind)
		got, gotErr := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, gotErr, "after liqoctl install: %s", kind)
		want, wantErr := asked.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, wantErr, kind)
		assert.Equal(t, want.Resource, got.Resource, kind)
		assert.Equal(t, want.Scope.Name(), got.Scope.Name(), kind)
	}
	_, err = mapper.RESTMapping(schema.GroupKind{Group: authv1beta1.GroupVersion.Group, Kind: "Nope"}, authv1beta1.GroupVersion.Version)
	assert.True(t, meta.IsNoMatchError(err), "%v", err)
}
