package cli

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// prefetchGroupVersions are the group versions whose discovery documents liqoctl fetches
// as it connects, at once: those of the kinds its commands use that builtinKinds does not
// hold (Tenants and Identities). The first also opens the connection while the command
// gets ready.
var prefetchGroupVersions = []schema.GroupVersion{{Group: "authentication.liqo.io", Version: "v1beta1"}}

// builtinKind is where a built-in kind is served: its resource and scope.
type builtinKind struct {
	resource   string
	namespaced bool
}

// builtinKinds are the kinds liqoctl uses that every Kubernetes release it supports serves
// at these group versions, the same way (GA for years, never to be removed in v1): their
// mapping needs no discovery. TestBuiltinKindsAsServed checks each against a real API
// server's discovery.
var builtinKinds = map[schema.GroupVersionKind]builtinKind{
	{Version: "v1", Kind: "ConfigMap"}:                                              {"configmaps", true},
	{Version: "v1", Kind: "Secret"}:                                                 {"secrets", true},
	{Version: "v1", Kind: "Namespace"}:                                              {"namespaces", false},
	{Version: "v1", Kind: "ServiceAccount"}:                                         {"serviceaccounts", true},
	{Version: "v1", Kind: "Event"}:                                                  {"events", true},
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                              {"deployments", true},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}:                    {"leases", true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:               {"roles", true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:        {"rolebindings", true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:        {"clusterroles", false},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}: {"clusterrolebindings", false},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SubjectAccessReview"}:     {"subjectaccessreviews", false},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview"}: {"selfsubjectaccessreviews", false},
	// GA since Kubernetes 1.28; the admission policies need 1.36 or later.
	{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview"}:       {"selfsubjectreviews", false},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}: {"certificatesigningrequests", false},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: {"customresourcedefinitions", false},
}

// builtinMapping is the mapping of gk at version, when builtinKinds holds it.
func builtinMapping(gk schema.GroupKind, version string) (*meta.RESTMapping, bool) {
	gvk := gk.WithVersion(version)
	k, ok := builtinKinds[gvk]
	if !ok {
		return nil, false
	}
	scope := meta.RESTScopeRoot
	if k.namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{Resource: gvk.GroupVersion().WithResource(k.resource), GroupVersionKind: gvk, Scope: scope}, true
}

// gvMapper is liqoctl's RESTMapper. It knows builtinKinds without asking, and learns the
// resources of any other group version from that group version's own discovery document
// (GET /apis/<group>/<version>, a few KiB) the first time a request needs them, instead
// of the whole API's: controller-runtime's mapper asks GET /api, then the aggregated GET
// /apis (about 60 KiB to decode), one after the other, before a command's first request.
// The documents of prefetchGroupVersions are fetched as liqoctl connects (Prefetch).
//
// A kind its document does not list, or a group version not served (a CRD not installed
// yet), is looked up again at the next question, as controller-runtime's mapper does: a
// command that installs CRDs and then uses them finds them. A question without exactly
// one version (none of liqoctl's clients asks one) goes to controller-runtime's mapper.
type gvMapper struct {
	disc     discovery.DiscoveryInterface
	fallback meta.RESTMapper

	mu  sync.Mutex
	gvs map[schema.GroupVersion]*gvEntry
}

// gvEntry is one group version's mapping, or its lookup in flight (done not closed yet).
type gvEntry struct {
	done   chan struct{}
	mapper meta.RESTMapper // nil: the group version is not served
	err    error
}

var _ meta.RESTMapper = (*gvMapper)(nil)

// NewRESTMapper is liqoctl's mapper of the cluster at cfg, reached through hc (the client
// of a Side): builtinKinds without discovery, any other kind from its group version's own
// discovery document.
func NewRESTMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	return newGVMapper(cfg, hc)
}

// BuiltinKinds are the kinds NewRESTMapper maps without discovery, for a test against a
// real API server's.
func BuiltinKinds() []schema.GroupVersionKind {
	return slices.SortedFunc(maps.Keys(builtinKinds), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
}

// newGVMapper is the mapper of the cluster at cfg, reached through hc.
func newGVMapper(cfg *rest.Config, hc *http.Client) (*gvMapper, error) {
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	fallback, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &gvMapper{disc: disc, fallback: fallback, gvs: map[schema.GroupVersion]*gvEntry{}}, nil
}

// Prefetch looks gvs up in the background, each at once.
func (m *gvMapper) Prefetch(gvs ...schema.GroupVersion) {
	for _, gv := range gvs {
		go func() { _, _, _ = m.lookup(gv, false) }()
	}
}

// lookup returns the mapping of gv (nil: not served) and whether this call fetched it.
// With again set, a mapping already known is fetched anew; a lookup in flight is waited
// for instead. A failed lookup is forgotten, so that the next question asks again.
func (m *gvMapper) lookup(gv schema.GroupVersion, again bool) (meta.RESTMapper, bool, error) {
	m.mu.Lock()
	e, ok := m.gvs[gv]
	if ok && again {
		select {
		case <-e.done:
			ok = false // known: fetch it anew
		default: // in flight: its answer is as fresh as a new one
		}
	}
	if ok {
		m.mu.Unlock()
		<-e.done
		return e.mapper, false, e.err
	}
	e = &gvEntry{done: make(chan struct{})}
	m.gvs[gv] = e
	m.mu.Unlock()

	e.mapper, e.err = m.fetch(gv)
	if e.err != nil {
		m.mu.Lock()
		if m.gvs[gv] == e {
			delete(m.gvs, gv)
		}
		m.mu.Unlock()
	}
	close(e.done)
	return e.mapper, true, e.err
}

// fetch reads gv's discovery document into a mapper (nil: gv is not served).
func (m *gvMapper) fetch(gv schema.GroupVersion) (meta.RESTMapper, error) {
	list, err := m.disc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovering the resources of %s: %w", gv, err)
	}
	version := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	return restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{{
		Group:              metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version},
		VersionedResources: map[string][]metav1.APIResource{gv.Version: list.APIResources},
	}}), nil
}

// askIn answers ask with the mapping of gv; a miss (gv not served, or ask finds no match in
// it) is asked once more of a fresh document, unless this call just fetched it.
func askIn[T any](m *gvMapper, gv schema.GroupVersion, miss func() error, ask func(meta.RESTMapper) (T, error)) (T, error) {
	var zero T
	for _, again := range []bool{false, true} {
		rm, fresh, err := m.lookup(gv, again)
		if err != nil {
			return zero, err
		}
		if rm != nil {
			out, err := ask(rm)
			if !meta.IsNoMatchError(err) {
				return out, err
			}
		}
		if fresh {
			break
		}
	}
	return zero, miss()
}

// oneVersion is the group version of a question that names exactly one version.
func oneVersion(group string, versions []string) (schema.GroupVersion, bool) {
	if len(versions) != 1 || versions[0] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: group, Version: versions[0]}, true
}

// byKind answers ask about gk in versions: of its group version's mapping when it names
// exactly one version, else of the full discovery.
func byKind[T any](m *gvMapper, gk schema.GroupKind, versions []string, ask func(meta.RESTMapper) (T, error)) (T, error) {
	gv, ok := oneVersion(gk.Group, versions)
	if !ok {
		return ask(m.fallback)
	}
	return askIn(m, gv, func() error { return &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions} }, ask)
}

// byResource answers ask about resource: of its group version's mapping when it names a
// version, else of the full discovery.
func byResource[T any](m *gvMapper, resource schema.GroupVersionResource, ask func(meta.RESTMapper) (T, error)) (T, error) {
	if resource.Version == "" {
		return ask(m.fallback)
	}
	return askIn(m, resource.GroupVersion(), func() error { return &meta.NoResourceMatchError{PartialResource: resource} }, ask)
}

// RESTMapping is the mapping of gk in its one version.
func (m *gvMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gv, ok := oneVersion(gk.Group, versions); ok {
		if mapping, ok := builtinMapping(gk, gv.Version); ok {
			return mapping, nil
		}
	}
	return byKind(m, gk, versions, func(rm meta.RESTMapper) (*meta.RESTMapping, error) { return rm.RESTMapping(gk, versions...) })
}

// RESTMappings are the mappings of gk in its one version.
func (m *gvMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return byKind(m, gk, versions, func(rm meta.RESTMapper) ([]*meta.RESTMapping, error) { return rm.RESTMappings(gk, versions...) })
}

// KindFor is the kind of resource.
func (m *gvMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return byResource(m, resource, func(rm meta.RESTMapper) (schema.GroupVersionKind, error) { return rm.KindFor(resource) })
}

// KindsFor are the kinds of resource.
func (m *gvMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return byResource(m, resource, func(rm meta.RESTMapper) ([]schema.GroupVersionKind, error) { return rm.KindsFor(resource) })
}

// ResourceFor is the full name of input.
func (m *gvMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return byResource(m, input, func(rm meta.RESTMapper) (schema.GroupVersionResource, error) { return rm.ResourceFor(input) })
}

// ResourcesFor are the full names of input.
func (m *gvMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return byResource(m, input, func(rm meta.RESTMapper) ([]schema.GroupVersionResource, error) { return rm.ResourcesFor(input) })
}

// ResourceSingularizer asks the full discovery: it names no group version.
func (m *gvMapper) ResourceSingularizer(resource string) (string, error) {
	return m.fallback.ResourceSingularizer(resource)
}
