// Package restmapper maps the kinds this project reads and writes to their API resources
// with as little API discovery as it can: the built-in kinds it uses, which every
// supported Kubernetes serves at the same version, are known without asking; every other
// kind (this project's and Liqo's CRDs, whose absence must say "install first") is found
// by discovery, which a command starts in the background as soon as it connects.
package restmapper

import (
	"net/http"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// builtin lists the built-in kinds answered without discovery, each with its resource and
// whether it is namespaced. Only kinds served at these versions by every Kubernetes this
// project supports belong here: a kind missing from the list is found by discovery, a kind
// listed wrongly would be asked of an address the API server does not serve.
var builtin = []struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
}{
	{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "configmaps", true},
	{corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", true},
	{corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", false},
	{corev1.SchemeGroupVersion.WithKind("ServiceAccount"), "serviceaccounts", true},
	{corev1.SchemeGroupVersion.WithKind("Event"), "events", true},
	{corev1.SchemeGroupVersion.WithKind("Node"), "nodes", false},
	{appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", true},
	{coordinationv1.SchemeGroupVersion.WithKind("Lease"), "leases", true},
	{rbacv1.SchemeGroupVersion.WithKind("Role"), "roles", true},
	{rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), "rolebindings", true},
	{rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), "clusterroles", false},
	{rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), "clusterrolebindings", false},
	{certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "certificatesigningrequests", false},
	{authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"), "subjectaccessreviews", false},
	{authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"), "selfsubjectaccessreviews", false},
	{authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"), "selfsubjectrulesreviews", false},
	{authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"), "localsubjectaccessreviews", true},
}

// Mapper answers the built-in kinds of builtin itself and asks discovery for the others.
type Mapper struct {
	static, dynamic meta.RESTMapper
}

var _ meta.RESTMapper = (*Mapper)(nil)

// New returns the mapper of the cluster cfg reaches through hc. It asks nothing until a
// kind outside the built-in list is mapped, or Warm is called.
func New(cfg *rest.Config, hc *http.Client) (*Mapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	var versions []schema.GroupVersion
	for _, b := range builtin {
		if gv := b.gvk.GroupVersion(); !slices.Contains(versions, gv) {
			versions = append(versions, gv)
		}
	}
	static := meta.NewDefaultRESTMapper(versions)
	for _, b := range builtin {
		scope := meta.RESTScopeRoot
		if b.namespaced {
			scope = meta.RESTScopeNamespace
		}
		static.AddSpecific(b.gvk, b.gvk.GroupVersion().WithResource(b.resource), b.gvk.GroupVersion().WithResource(b.resource[:len(b.resource)-1]), scope)
	}
	return &Mapper{static: static, dynamic: dynamic}, nil
}

// Warm starts discovery in the background, so that the first request for a kind outside
// the built-in list does not wait for it: a command calls it as it connects, while its
// first requests (all of built-in kinds) go out. Discovery errors are not kept: the
// request that needs the mapping asks again, and gets the error.
func (m *Mapper) Warm() {
	go func() {
		_, _ = m.dynamic.RESTMapping(authv1beta1.GroupVersion.WithKind("Tenant").GroupKind(), authv1beta1.GroupVersion.Version)
	}()
}

// first asks the static mapper, then, when it knows nothing of the input, the dynamic one.
func first[T any](m *Mapper, ask func(meta.RESTMapper) (T, error)) (T, error) {
	out, err := ask(m.static)
	if err == nil || !meta.IsNoMatchError(err) {
		return out, err
	}
	return ask(m.dynamic)
}

// KindFor implements meta.RESTMapper.
func (m *Mapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return first(m, func(r meta.RESTMapper) (schema.GroupVersionKind, error) { return r.KindFor(resource) })
}

// KindsFor implements meta.RESTMapper.
func (m *Mapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return first(m, func(r meta.RESTMapper) ([]schema.GroupVersionKind, error) { return r.KindsFor(resource) })
}

// ResourceFor implements meta.RESTMapper.
func (m *Mapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return first(m, func(r meta.RESTMapper) (schema.GroupVersionResource, error) { return r.ResourceFor(input) })
}

// ResourcesFor implements meta.RESTMapper.
func (m *Mapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return first(m, func(r meta.RESTMapper) ([]schema.GroupVersionResource, error) { return r.ResourcesFor(input) })
}

// RESTMapping implements meta.RESTMapper.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return first(m, func(r meta.RESTMapper) (*meta.RESTMapping, error) { return r.RESTMapping(gk, versions...) })
}

// RESTMappings implements meta.RESTMapper.
func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return first(m, func(r meta.RESTMapper) ([]*meta.RESTMapping, error) { return r.RESTMappings(gk, versions...) })
}

// ResourceSingularizer implements meta.RESTMapper. The static mapper's error for a
// resource it does not know is no NoMatch error: any error asks the dynamic one.
func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	if out, err := m.static.ResourceSingularizer(resource); err == nil {
		return out, nil
	}
	return m.dynamic.ResourceSingularizer(resource)
}

// BuiltinKinds are the kinds the mapper answers without discovery.
func BuiltinKinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(builtin))
	for i, b := range builtin {
		out[i] = b.gvk
	}
	return out
}
