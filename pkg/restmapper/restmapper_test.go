package restmapper

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// recorder fails every request and remembers its path.
type recorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.Path)
	return nil, errors.New("unreachable in this test")
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

func newMapper(t *testing.T) (*Mapper, *recorder) {
	t.Helper()
	rec := &recorder{}
	m, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, &http.Client{Transport: rec})
	require.NoError(t, err)
	return m, rec
}

// TestBuiltinKindsAskNothing: every built-in kind maps, with and without its version, by
// kind and by resource, and the API server is asked nothing.
func TestBuiltinKindsAskNothing(t *testing.T) {
	m, rec := newMapper(t)
	for _, b := range builtin {
		t.Run(b.gvk.String(), func(t *testing.T) {
			for _, versions := range [][]string{{b.gvk.Version}, nil} {
				got, err := m.RESTMapping(b.gvk.GroupKind(), versions...)
				require.NoError(t, err)
				require.Equal(t, b.gvk.GroupVersion().WithResource(b.resource), got.Resource)
				require.Equal(t, b.gvk, got.GroupVersionKind)
				require.Equal(t, b.namespaced, got.Scope.Name() == meta.RESTScopeNameNamespace)
			}
			gvk, err := m.KindFor(schema.GroupVersionResource{Group: b.gvk.Group, Resource: b.resource})
			require.NoError(t, err)
			require.Equal(t, b.gvk, gvk)
			singular, err := m.ResourceSingularizer(b.resource)
			require.NoError(t, err)
			require.Equal(t, b.resource[:len(b.resource)-1], singular)
		})
	}
	require.Empty(t, rec.seen(), "no discovery for built-in kinds")
}

// TestOtherKindsAskDiscovery: a kind outside the list (this project's Tenant, a built-in
// at another version) is asked of discovery, and its failure is the caller's error.
func TestOtherKindsAskDiscovery(t *testing.T) {
	for _, gk := range []struct {
		kind    schema.GroupKind
		version string
	}{
		{authv1beta1.GroupVersion.WithKind("Tenant").GroupKind(), authv1beta1.GroupVersion.Version},
		{schema.GroupKind{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}, "v1beta1"},
		{schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}, ""},
	} {
		t.Run(gk.kind.String(), func(t *testing.T) {
			m, rec := newMapper(t)
			_, err := m.RESTMapping(gk.kind, gk.version)
			require.ErrorContains(t, err, "unreachable in this test")
			require.NotEmpty(t, rec.seen(), "discovery was asked")
		})
	}
}
