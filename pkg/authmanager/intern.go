package authmanager

import (
	"bytes"
	"sync"
	"unique"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// intern returns the one shared copy of s (unique.Make): the cache holds, per consumer,
// about ten objects that repeat the same namespace, labels, owner and condition names,
// each decoded into its own strings. Shared copies are freed once no object holds them.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMeta shares the strings of o's metadata that objects repeat: its namespace, its
// labels (keys and values: a consumer's cluster ID labels every object of its namespace),
// the keys of its annotations, its owners' references and its finalizers.
func internMeta(o metav1.Object) {
	o.SetNamespace(intern(o.GetNamespace()))
	if l := o.GetLabels(); len(l) > 0 {
		shared := make(map[string]string, len(l))
		for k, v := range l {
			shared[intern(k)] = intern(v)
		}
		o.SetLabels(shared)
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		shared := make(map[string]string, len(a))
		for k, v := range a {
			shared[intern(k)] = v
		}
		o.SetAnnotations(shared)
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind, refs[i].Name = intern(refs[i].APIVersion), intern(refs[i].Kind), intern(refs[i].Name)
	}
	fins := o.GetFinalizers()
	for i := range fins {
		fins[i] = intern(fins[i])
	}
}

// internRBAC shares the strings of a Role's rules and a binding's references, the same
// in every tenant namespace.
func internRBAC(obj any) {
	switch x := obj.(type) {
	case *rbacv1.Role:
		for i := range x.Rules {
			internAll(x.Rules[i].APIGroups)
			internAll(x.Rules[i].Resources)
			internAll(x.Rules[i].Verbs)
			internAll(x.Rules[i].ResourceNames)
		}
	case *rbacv1.RoleBinding:
		internRef(&x.RoleRef)
		internSubjects(x.Subjects)
	case *rbacv1.ClusterRoleBinding:
		internRef(&x.RoleRef)
		internSubjects(x.Subjects)
	}
}

func internAll(s []string) {
	for i := range s {
		s[i] = intern(s[i])
	}
}

func internRef(r *rbacv1.RoleRef) {
	r.APIGroup, r.Kind, r.Name = intern(r.APIGroup), intern(r.Kind), intern(r.Name)
}

func internSubjects(s []rbacv1.Subject) {
	for i := range s {
		s[i].APIGroup, s[i].Kind, s[i].Name, s[i].Namespace = intern(s[i].APIGroup), intern(s[i].Kind), intern(s[i].Name), intern(s[i].Namespace)
	}
}

// sharedBytes keeps one copy of a byte string many cached objects repeat (the CA every
// Tenant's status publishes): one slot, so that values written to be different only take
// the slot in turn and never add up.
type sharedBytes struct {
	mu  sync.Mutex
	cur []byte
}

// share returns the kept copy when b equals it, and otherwise keeps b.
func (s *sharedBytes) share(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(s.cur, b) {
		return s.cur
	}
	s.cur = b
	return b
}

// internTenant shares what every Tenant of this provider repeats: its cluster ID (its name
// and its spec), the CA and API server its status publishes, the types and reasons of its
// conditions.
func (s *CacheScope) internTenant(t *authv1beta1.Tenant) {
	t.Name = intern(t.Name)
	t.Spec.ClusterID = authv1beta1.ClusterID(intern(string(t.Spec.ClusterID)))
	if ap := t.Status.AuthParams; ap != nil {
		ap.CA = s.ca.share(ap.CA)
		ap.APIServer = intern(ap.APIServer)
	}
	t.Status.TenantNamespace = intern(t.Status.TenantNamespace)
	for i := range t.Status.Conditions {
		c := &t.Status.Conditions[i]
		c.Type, c.Reason = intern(c.Type), intern(c.Reason)
	}
}
