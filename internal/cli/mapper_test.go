package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// discoveryServer serves the per group version discovery documents of docs (a path with
// no document is 404, a path in failing is 500) and counts the requests to each path.
type discoveryServer struct {
	mu      sync.Mutex
	docs    map[string][]metav1.APIResource
	failing map[string]bool
	asked   map[string]int
	// hold, when set, blocks every request until it is closed.
	hold chan struct{}
}

func (d *discoveryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.hold != nil {
		<-d.hold
	}
	d.mu.Lock()
	d.asked[r.URL.Path]++
	res, ok := d.docs[r.URL.Path]
	failing := d.failing[r.URL.Path]
	d.mu.Unlock()
	switch {
	case failing:
		http.Error(w, "broken", http.StatusInternalServerError)
	case !ok:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{GroupVersion: "x", APIResources: res})
	}
}

// serveLiqo makes the document of authentication.liqo.io/v1beta1 list res.
func (d *discoveryServer) serveLiqo(res ...metav1.APIResource) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.docs[liqoGV] = res
}

// liqoAsked is how many times that document was asked for.
func (d *discoveryServer) liqoAsked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[liqoGV]
}

func (d *discoveryServer) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, v := range d.asked {
		n += v
	}
	return n
}

const liqoGV = "/apis/authentication.liqo.io/v1beta1"

var tenantGK = schema.GroupKind{Group: "authentication.liqo.io", Kind: "Tenant"}

func tenants() metav1.APIResource {
	return metav1.APIResource{Name: "tenants", Namespaced: true, Kind: "Tenant", Verbs: metav1.Verbs{"get"}}
}

func newTestMapper(t *testing.T) (*gvMapper, *discoveryServer) {
	t.Helper()
	d := &discoveryServer{docs: map[string][]metav1.APIResource{}, failing: map[string]bool{}, asked: map[string]int{}}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	m, err := newGVMapper(cfg, hc)
	require.NoError(t, err)
	return m, d
}

func TestGVMapperBuiltinKindsAskNothing(t *testing.T) {
	m, d := newTestMapper(t)
	for _, gvk := range BuiltinKinds() {
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, gvk)
		assert.Equal(t, gvk, mapping.GroupVersionKind)
		assert.Equal(t, builtinKinds[gvk].resource, mapping.Resource.Resource)
		assert.Equal(t, gvk.GroupVersion(), mapping.Resource.GroupVersion())
		want := meta.RESTScopeNameRoot
		if builtinKinds[gvk].namespaced {
			want = meta.RESTScopeNameNamespace
		}
		assert.Equal(t, want, mapping.Scope.Name(), gvk)
	}
	assert.Zero(t, d.total(), "a built-in kind is mapped without a request")
}

func TestGVMapperLearnsAGroupVersionOnce(t *testing.T) {
	m, d := newTestMapper(t)
	d.serveLiqo(tenants(), metav1.APIResource{Name: "tenants/status", Namespaced: true, Kind: "Tenant"})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			mapping, err := m.RESTMapping(tenantGK, "v1beta1")
			if assert.NoError(t, err) {
				assert.Equal(t, "tenants", mapping.Resource.Resource)
				assert.Equal(t, meta.RESTScopeNameNamespace, mapping.Scope.Name())
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, d.liqoAsked(), "concurrent questions share one lookup")
	assert.Equal(t, d.liqoAsked(), d.total(), "only the group version's own document is asked")
}

func TestGVMapperPrefetchIsWhatQuestionsWaitFor(t *testing.T) {
	m, d := newTestMapper(t)
	d.serveLiqo(tenants())
	d.hold = make(chan struct{})
	m.Prefetch(schema.GroupVersion{Group: "authentication.liqo.io", Version: "v1beta1"})
	answered := make(chan error, 1)
	go func() { _, err := m.RESTMapping(tenantGK, "v1beta1"); answered <- err }()
	select {
	case err := <-answered:
		t.Fatalf("answered before the prefetched document arrived: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(d.hold)
	require.NoError(t, <-answered)
	assert.Equal(t, 1, d.liqoAsked())
}

func TestGVMapperFindsWhatIsInstalledLater(t *testing.T) {
	m, d := newTestMapper(t)
	// Not served yet (the CRDs are not installed): no match, asked once per question.
	_, err := m.RESTMapping(tenantGK, "v1beta1")
	require.True(t, meta.IsNoMatchError(err), "%v", err)
	assert.Equal(t, 1, d.liqoAsked())
	_, err = m.RESTMapping(tenantGK, "v1beta1")
	require.True(t, meta.IsNoMatchError(err), "%v", err)
	assert.Equal(t, 2, d.liqoAsked(), "a group version not served is asked again at each question, once")

	// Installed: found at the next question.
	d.serveLiqo(tenants())
	mapping, err := m.RESTMapping(tenantGK, "v1beta1")
	require.NoError(t, err)
	assert.Equal(t, "tenants", mapping.Resource.Resource)

	// A kind the known document lacks (a CRD of the group installed since) is asked for
	// again, and found.
	peerings := schema.GroupKind{Group: tenantGK.Group, Kind: "Peering"}
	d.serveLiqo(tenants(), metav1.APIResource{Name: "peerings", Namespaced: true, Kind: "Peering"})
	before := d.liqoAsked()
	mapping, err = m.RESTMapping(peerings, "v1beta1")
	require.NoError(t, err)
	assert.Equal(t, "peerings", mapping.Resource.Resource)
	assert.Equal(t, before+1, d.liqoAsked())
	// Known now: no request.
	_, err = m.RESTMapping(peerings, "v1beta1")
	require.NoError(t, err)
	assert.Equal(t, before+1, d.liqoAsked())

	// A kind that is nowhere: no match, with what was searched.
	_, err = m.RESTMapping(schema.GroupKind{Group: tenantGK.Group, Kind: "Nope"}, "v1beta1")
	var noKind *meta.NoKindMatchError
	require.ErrorAs(t, err, &noKind)
	assert.Equal(t, []string{"v1beta1"}, noKind.SearchedVersions)
	_, err = m.KindFor(schema.GroupVersionResource{Group: tenantGK.Group, Version: "v1beta1", Resource: "nopes"})
	assert.True(t, meta.IsNoMatchError(err), "%v", err)
}

func TestGVMapperDoesNotKeepAFailure(t *testing.T) {
	m, d := newTestMapper(t)
	d.serveLiqo(tenants())
	d.failing[liqoGV] = true
	_, err := m.RESTMapping(tenantGK, "v1beta1")
	require.Error(t, err)
	assert.False(t, meta.IsNoMatchError(err), "a failure to discover is no answer: %v", err)
	assert.Contains(t, err.Error(), "discovering the resources of authentication.liqo.io/v1beta1")
	d.mu.Lock()
	d.failing[liqoGV] = false
	d.mu.Unlock()
	_, err = m.RESTMapping(tenantGK, "v1beta1")
	require.NoError(t, err, "asked again after a failure")
}

func TestGVMapperResourceQuestions(t *testing.T) {
	m, d := newTestMapper(t)
	d.serveLiqo(tenants())
	gvr := schema.GroupVersionResource{Group: tenantGK.Group, Version: "v1beta1", Resource: "tenants"}
	gvk, err := m.KindFor(gvr)
	require.NoError(t, err)
	assert.Equal(t, tenantGK.WithVersion("v1beta1"), gvk)
	full, err := m.ResourceFor(schema.GroupVersionResource{Group: tenantGK.Group, Version: "v1beta1", Resource: "tenant"})
	require.NoError(t, err)
	assert.Equal(t, gvr, full)
	mappings, err := m.RESTMappings(tenantGK, "v1beta1")
	require.NoError(t, err)
	require.Len(t, mappings, 1)
	assert.Equal(t, gvr, mappings[0].Resource)
}

// gatedTransport answers after release is closed, and records how many requests were in
// it at once.
type gatedTransport struct {
	release       chan struct{}
	in, most, all atomic.Int32
}

func (g *gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	n := g.in.Add(1)
	defer g.in.Add(-1)
	g.all.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	if r.URL.Path == "/first" {
		<-g.release
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// roundTrip sends r through rt, closing the answer's body.
func roundTrip(rt http.RoundTripper, r *http.Request) error {
	resp, err := rt.RoundTrip(r)
	if err == nil {
		_ = resp.Body.Close()
	}
	return err
}

func TestConnGateHoldsRequestsUntilTheFirstIsAnswered(t *testing.T) {
	inner := &gatedTransport{release: make(chan struct{})}
	gate := newConnGate(inner)
	req := func(path string) *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://example.test"+path, nil)
		require.NoError(t, err)
		return r
	}
	first := make(chan error, 1)
	go func() { first <- roundTrip(gate, req("/first")) }()
	require.Eventually(t, func() bool { return inner.all.Load() == 1 }, time.Second, time.Millisecond)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			assert.NoError(t, roundTrip(gate, req("/then")))
		})
	}
	time.Sleep(20 * time.Millisecond)
	assert.EqualValues(t, 1, inner.all.Load(), "nothing goes before the first request is answered")
	close(inner.release)
	require.NoError(t, <-first)
	wg.Wait()
	assert.EqualValues(t, 6, inner.all.Load())
	assert.Same(t, inner, gate.(*connGate).WrappedRoundTripper())
}

func TestConnGateWaitEndsWithTheRequest(t *testing.T) {
	inner := &gatedTransport{release: make(chan struct{})}
	defer close(inner.release)
	gate := newConnGate(inner)
	go func() {
		r, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://example.test/first", nil)
		_ = roundTrip(gate, r)
	}()
	require.Eventually(t, func() bool { return inner.all.Load() == 1 }, time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.test/then", nil)
	require.NoError(t, err)
	err = roundTrip(gate, r)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}
