package revocation

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Actions are the single actions rules grant, in namespace ns: one per verb, group,
// resource (with subresource) and resource name.
func Actions(rules []rbacv1.PolicyRule, ns string) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, rule := range rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range rule.Verbs {
					for _, name := range names {
						out = append(out, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub, Name: name})
					}
				}
			}
		}
	}
	return out
}

// AllowedActions asks the API server, with SubjectAccessReviews, which of the actions
// granted by rules a user in groups may still perform in namespace ns. It returns them as
// "verb group/resource[/name]"; an empty result proves that every one is denied.
func AllowedActions(ctx context.Context, c client.Client, user string, groups []string, ns string, rules []rbacv1.PolicyRule) ([]string, error) {
	var allowed []string
	for _, a := range Actions(rules, ns) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &a}}
		if err := c.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("asking the API server whether %s may %s %s: %w", user, a.Verb, a.Resource, err)
		}
		if sar.Status.Allowed {
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			allowed = append(allowed, strings.TrimSuffix(fmt.Sprintf("%s %s/%s/%s", a.Verb, a.Group, res, a.Name), "/"))
		}
	}
	return allowed, nil
}

// SelfAllowedActions asks the API server, with SelfSubjectAccessReviews made through c
// (whose credentials are the ones in question: a certificate a rotation replaced), which
// of the actions granted by rules they may still perform in namespace ns. An empty result
// proves that every one is denied to whoever holds them.
func SelfAllowedActions(ctx context.Context, c client.Client, ns string, rules []rbacv1.PolicyRule) ([]string, error) {
	var allowed []string
	for _, a := range Actions(rules, ns) {
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
		if err := c.Create(ctx, ssar); err != nil {
			return nil, fmt.Errorf("asking the API server whether these credentials may %s %s: %w", a.Verb, a.Resource, err)
		}
		if ssar.Status.Allowed {
			allowed = append(allowed, describe(a))
		}
	}
	return allowed, nil
}

// Binding names a RoleBinding or ClusterRoleBinding and what it grants to whom.
type Binding struct {
	Kind, Namespace, Name string
	RoleRef               rbacv1.RoleRef
	Subject               rbacv1.Subject
	// ControllerUID is the UID of the object controlling the binding, if any.
	ControllerUID string
}

// String describes the binding for a message.
func (b Binding) String() string {
	where := ""
	if b.Namespace != "" {
		where = fmt.Sprintf(" in namespace %q", b.Namespace)
	}
	return fmt.Sprintf("%s %q%s (%s %q to %s %q)", b.Kind, b.Name, where, b.RoleRef.Kind, b.RoleRef.Name, b.Subject.Kind, b.Subject.Name)
}

// SubjectIndex is the field index (IndexSubjects) of a cache's RoleBindings and
// ClusterRoleBindings by the users and groups they name, as "User/<name>" and
// "Group/<name>".
const SubjectIndex = "liqo-auth.subjects"

// IndexSubjects registers SubjectIndex with a cache's field indexer, so that
// BindingsNaming, reading through Indexed, looks a name up instead of reading every
// binding of the cluster at each issuance (the manager's CPU grew with the square of its
// consumers).
func IndexSubjects(ctx context.Context, fi client.FieldIndexer) error {
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.ClusterRoleBinding{}} {
		if err := fi.IndexField(ctx, obj, SubjectIndex, subjectKeys); err != nil {
			return fmt.Errorf("indexing %T by subject: %w", obj, err)
		}
	}
	return nil
}

// subjectKeys are the SubjectIndex keys of a binding: those of its users and groups.
func subjectKeys(o client.Object) []string {
	var subjects []rbacv1.Subject
	switch b := o.(type) {
	case *rbacv1.RoleBinding:
		subjects = b.Subjects
	case *rbacv1.ClusterRoleBinding:
		subjects = b.Subjects
	}
	var out []string
	for _, s := range subjects {
		if userOrGroup(s) {
			out = append(out, subjectKey(s.Kind, s.Name))
		}
	}
	return out
}

// subjectKey is the key of a user or group subject ("User/<name>", "Group/<name>"): the
// one definition the index and the scan's filter share, so that they cannot disagree on
// which bindings name whom.
func subjectKey(kind, name string) string { return kind + "/" + name }

// userOrGroup says whether s is a user or a group, the subjects the scan looks for.
func userOrGroup(s rbacv1.Subject) bool {
	return s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind
}

// Indexed is a client whose reads come from a cache with IndexSubjects registered:
// BindingsNaming reads through it only the bindings naming the user or groups.
type Indexed struct{ client.Client }

// BindingsNaming finds every RoleBinding, in every namespace, and every ClusterRoleBinding
// that names user or one of groups. From a cache, the bindings are read without copies;
// through Indexed, only those the index lists under one of the names are read.
func BindingsNaming(ctx context.Context, c client.Reader, user string, groups []string) ([]Binding, error) {
	want := []string{subjectKey(rbacv1.UserKind, user)}
	for _, g := range groups {
		want = append(want, subjectKey(rbacv1.GroupKind, g))
	}
	var out []Binding
	add := func(kind string, obj metav1.Object, roleRef rbacv1.RoleRef, subjects []rbacv1.Subject) {
		ctrl := ""
		if ref := metav1.GetControllerOf(obj); ref != nil {
			ctrl = string(ref.UID)
		}
		for _, s := range subjects {
			if userOrGroup(s) && slices.Contains(want, subjectKey(s.Kind, s.Name)) {
				out = append(out, Binding{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), RoleRef: roleRef, Subject: s, ControllerUID: ctrl})
			}
		}
	}
	// Every binding, or, through the index, those naming each wanted name in turn.
	selections := [][]client.ListOption{{client.UnsafeDisableDeepCopy}}
	if _, indexed := c.(Indexed); indexed {
		selections = nil
		for _, w := range want {
			selections = append(selections, []client.ListOption{client.UnsafeDisableDeepCopy, client.MatchingFields{SubjectIndex: w}})
		}
	}
	for _, opts := range selections {
		var rbs rbacv1.RoleBindingList
		if err := c.List(ctx, &rbs, opts...); err != nil {
			return nil, fmt.Errorf("listing RoleBindings: %w", err)
		}
		for i := range rbs.Items {
			add("RoleBinding", &rbs.Items[i], rbs.Items[i].RoleRef, rbs.Items[i].Subjects)
		}
		var crbs rbacv1.ClusterRoleBindingList
		if err := c.List(ctx, &crbs, opts...); err != nil {
			return nil, fmt.Errorf("listing ClusterRoleBindings: %w", err)
		}
		for i := range crbs.Items {
			add("ClusterRoleBinding", &crbs.Items[i], crbs.Items[i].RoleRef, crbs.Items[i].Subjects)
		}
	}
	slices.SortFunc(out, func(a, b Binding) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(out, func(a, b Binding) bool { return a.String() == b.String() }), nil
}

// sentinelActions are powerful actions no consumer identity may hold: asked with
// SubjectAccessReviews, they catch grants of authorizers other than RBAC (webhooks, ABAC),
// which the binding scan cannot see. They are few on purpose: each is an API call per
// issuance, and RBAC, where nearly every grant lives, is scanned completely.
func sentinelActions() []authorizationv1.ResourceAttributes {
	return []authorizationv1.ResourceAttributes{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "get", Resource: "secrets"},
		{Verb: "create", Resource: "pods"},
		{Verb: "impersonate", Resource: "users"},
		{Verb: "update", Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "approval"},
	}
}

// Sentinel is a powerful action a SubjectAccessReview allowed, with the authorizer's reason
// (RBAC names the binding).
type Sentinel struct {
	Action, Reason string
}

// SentinelsAllowed asks which of a fixed list of powerful actions (any verb on anything,
// reading Secrets, creating pods, impersonation, approving CSRs) user in groups may
// perform, beyond what every authenticated user may. It covers every authorizer of the
// cluster, RBAC or not, for those actions.
func SentinelsAllowed(ctx context.Context, c client.Client, user string, groups []string) ([]Sentinel, error) {
	actions := sentinelActions()
	results := make([]*authorizationv1.SubjectAccessReview, len(actions))
	var eg errgroup.Group
	for i, a := range actions {
		eg.Go(func() error {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &a}}
			if err := c.Create(ctx, sar); err != nil {
				return fmt.Errorf("asking the API server whether %s may %s: %w", user, describe(a), err)
			}
			results[i] = sar
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	var out []Sentinel
	for i, r := range results {
		if !r.Status.Allowed {
			continue
		}
		// The baseline: is it allowed to any authenticated user? Then it is the cluster's
		// policy, not something this user name holds.
		base := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "liqo-auth:baseline:" + rand.Text(), Groups: []string{"system:authenticated"}, ResourceAttributes: &actions[i]}}
		if err := c.Create(ctx, base); err != nil {
			return nil, fmt.Errorf("asking the API server for the baseline of %s: %w", describe(actions[i]), err)
		}
		if !base.Status.Allowed {
			out = append(out, Sentinel{Action: describe(actions[i]), Reason: r.Status.Reason})
		}
	}
	return out, nil
}

func describe(a authorizationv1.ResourceAttributes) string {
	res := a.Resource
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	where := "in every namespace"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s %s", a.Verb, res, where)
}

// RevocationGroups are the groups a consumer's certificate authenticates with: its
// Organization, the group every authenticated user has, and the key groups of its
// key-bound certificates (keyGroups), if any.
func RevocationGroups(keyGroups ...string) []string {
	return append([]string{wire.UserGroup, "system:authenticated"}, keyGroups...)
}

// ProveRevoked checks that user, with RevocationGroups and the group named after the
// cluster ID (the Organization of Liqo's virtual-kubelet identities, which Liqo binds
// cluster-wide), may do none of what rules granted, neither in namespace ns nor in any
// namespace, and that no RoleBinding in any namespace and no ClusterRoleBinding names the
// user, group liqo.io or that group. It returns what remains, in words; empty means
// revoked. SubjectAccessReviews go through c, the binding scan through r. keyGroups are
// the key groups of the consumer's key-bound certificates (none for Liqo's form): the
// reviews ask with them too, and no binding may name them.
func ProveRevoked(ctx context.Context, c client.Client, r client.Reader, user, ns string, rules []rbacv1.PolicyRule, keyGroups ...string) ([]string, error) {
	var left []string
	groups := append(RevocationGroups(keyGroups...), user)
	for _, where := range []string{ns, ""} {
		allowed, err := AllowedActions(ctx, c, user, groups, where, rules)
		if err != nil {
			return nil, err
		}
		scope := fmt.Sprintf("in namespace %q", where)
		if where == "" {
			scope = "in every namespace"
		}
		for _, a := range allowed {
			left = append(left, a+" "+scope)
		}
	}
	bindings, err := BindingsNaming(ctx, r, user, append([]string{wire.UserGroup, user}, keyGroups...))
	if err != nil {
		return nil, err
	}
	for _, b := range bindings {
		left = append(left, "named by "+b.String())
	}
	return left, nil
}

// UnexpectedPermissions says what user, with groups, may do on this cluster beyond what
// the bindings own accepts grant: every RoleBinding (in any namespace) and
// ClusterRoleBinding naming that user or one of groups, and the powerful actions any
// authorizer allows it beyond what every authenticated user may. An identity a provider
// issues must never receive the powers of an existing user by choosing its name.
func UnexpectedPermissions(ctx context.Context, c client.Client, user string, groups []string, own func(Binding) bool) ([]string, error) {
	bindings, err := BindingsNaming(ctx, c, user, groups)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bindings {
		if !own(b) {
			out = append(out, b.String())
		}
	}
	sentinels, err := SentinelsAllowed(ctx, c, user, append(slices.Clone(groups), "system:authenticated"))
	if err != nil {
		return nil, err
	}
	for _, s := range sentinels {
		out = append(out, fmt.Sprintf("may %s (%s)", s.Action, s.Reason))
	}
	return out, nil
}
