package providerclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// TestNewAsksNoDiscoveryForItsKinds: a provider's client reads this project's kinds and
// Leases with no discovery request first; another kind is still found by discovery.
func TestNewAsksNoDiscoveryForItsKinds(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.liqo.io/v1beta1/namespaces/tn/tenants/cl-consumer":
			_ = json.NewEncoder(w).Encode(&authv1beta1.Tenant{TypeMeta: metav1.TypeMeta{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Tenant"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "tn", Name: "cl-consumer"}})
		case "/apis/coordination.k8s.io/v1/namespaces/tn/leases/presence":
			_ = json.NewEncoder(w).Encode(&coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "tn", Name: "presence"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	s := runtime.NewScheme()
	require.NoError(t, authv1beta1.AddToScheme(s))
	require.NoError(t, coordinationv1.AddToScheme(s))
	c, err := New(&rest.Config{Host: srv.URL}, s)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "tn", Name: "cl-consumer"}, &authv1beta1.Tenant{}))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "tn", Name: "presence"}, &coordinationv1.Lease{}))
	mu.Lock()
	assert.Equal(t, []string{"/apis/authentication.liqo.io/v1beta1/namespaces/tn/tenants/cl-consumer", "/apis/coordination.k8s.io/v1/namespaces/tn/leases/presence"}, paths)
	mu.Unlock()

	// A kind it does not know: discovery, which this server does not serve.
	err = c.Get(ctx, client.ObjectKey{Namespace: "tn", Name: "x"}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
	require.Error(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, slices.Contains(paths, "/api") || slices.Contains(paths, "/apis"), "looked up by discovery: %v", paths)
}
