package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
)

// The manager holds escalate on Roles in tenant namespaces (the API server's check that it
// holds every rule waited for a consistent read): admission alone bounds the Roles it
// writes. A thief of its ServiceAccount token tries to write a Role with rules it does not
// hold, in every shape (create, update, merge, JSON and strategic patches, server-side
// apply, generateName) and every namespace it can reach; a namespace creator and a Role
// writer try what the change opens to them. Each case passing means refused.

const tenantWritesRefusal = "writes only the tenant's reader Role and slices' Roles, with exactly their rules"

func escalateCan(t *testing.T, c client.Client, ns string) bool {
	return selfCan(t, c, "escalate", rbacv1.GroupName, "roles", ns, "")
}

// TestAttackEscalate: see above.
func TestAttackEscalate(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "attack-escalate"), "cl-provider")[0]
	ctx := context.Background()
	liqo := wire.DefaultLiqoNamespace
	tn := ensureTN(t, p.client, "cl-consumer")
	saCfg, err := p.cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
	require.NoError(t, err)
	thief := newClient(t, saCfg)

	wide := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	secretsGet := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}
	role := func(ns, name string, rules []rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	}
	reader := access.TenantReaderRules("cl-consumer")
	mod := func(f func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		rs := access.TenantReaderRules("cl-consumer")
		return f(rs)
	}
	slice := func(s string, f func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		return f(access.SliceRules(s))
	}

	// Sanity: the thief does hold escalate in the tenant namespace (the change under attack).
	require.True(t, escalateCan(t, thief, tn), "the manager holds escalate in its tenant namespace")

	t.Run("CreateShapes", func(t *testing.T) {
		for _, tc := range []struct {
			what string
			obj  *rbacv1.Role
		}{
			{"reader name, odd casing", role(tn, "Liqo-Tenant-Reader", wide)},
			{"reader name with suffix", role(tn, wire.TenantReaderName+".x", wide)},
			{"reader name, reader rules + secrets", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { return append(rs, secretsGet) }))},
			{"reader name, secrets first then reader rules", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				return append([]rbacv1.PolicyRule{secretsGet}, rs...)
			}))},
			{"reader name, tenants resourceNames omitted", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[0].ResourceNames = nil; return rs }))},
			{"reader name, lease resourceNames omitted", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[1].ResourceNames = nil; return rs }))},
			{"reader name, verbs *", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[1].Verbs = []string{"*"}; return rs }))},
			{"reader name, lease verbs + create/delete", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				rs[1].Verbs = append(rs[1].Verbs, "create", "delete")
				return rs
			}))},
			{"reader name, apiGroups *", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[0].APIGroups = []string{"*"}; return rs }))},
			{"reader name, apiGroups + core", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				rs[1].APIGroups = append(rs[1].APIGroups, "")
				return rs
			}))},
			{"reader name, resources + secrets", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				rs[1].Resources = append(rs[1].Resources, "secrets")
				return rs
			}))},
			{"reader name, resources *", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[1].Resources = []string{"*"}; return rs }))},
			{"reader name, peer's rules twice", role(tn, wire.TenantReaderName, append(access.TenantReaderRules("cl-consumer"), access.TenantReaderRules("cl-consumer")...))},
			{"reader name, nonResourceURLs added", role(tn, wire.TenantReaderName, mod(func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				return append(rs, rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}})
			}))},
			{"reader name, no peer ('' resourceName, list-all quirk) + secrets", role(tn, wire.TenantReaderName, append(access.TenantReaderRules(""), secretsGet))},
			{"slice name, wide", role(tn, "liqo-resourceslice-a", wide)},
			{"slice name, empty slice, wide", role(tn, "liqo-resourceslice-", wide)},
			{"slice name, other slice's rules", role(tn, "liqo-resourceslice-a", access.SliceRules("b"))},
			{"slice name, resourceNames omitted", role(tn, "liqo-resourceslice-a", slice("a", func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { rs[0].ResourceNames = nil; return rs }))},
			{"slice name, + secrets", role(tn, "liqo-resourceslice-a", slice("a", func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule { return append(rs, secretsGet) }))},
			{"slice name, resources + secrets", role(tn, "liqo-resourceslice-a", slice("a", func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				rs[0].Resources = append(rs[0].Resources, "secrets")
				return rs
			}))},
			{"slice name, verbs + update", role(tn, "liqo-resourceslice-a", slice("a", func(rs []rbacv1.PolicyRule) []rbacv1.PolicyRule {
				rs[0].Verbs = append(rs[0].Verbs, "update")
				return rs
			}))},
			{"slice name casing", role(tn, "Liqo-ResourceSlice-a", access.SliceRules("a"))},
			{"another name, exact reader rules", role(tn, "x", reader)},
		} {
			err := thief.Create(ctx, tc.obj)
			if !assert.Error(t, err, "BREAK: %s admitted", tc.what) {
				var got rbacv1.Role
				_ = p.client.Get(ctx, client.ObjectKeyFromObject(tc.obj), &got)
				t.Logf("BREAK %s: stored rules %+v", tc.what, got.Rules)
				_ = p.client.Delete(ctx, &got)
				continue
			}
			t.Logf("%s: %v", tc.what, err)
		}
		// generateName: the name admission sees is the generated one.
		gen := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, GenerateName: "liqo-resourceslice-"}, Rules: wide}
		err := thief.Create(ctx, gen)
		assertRefusedByOneOf(t, err, tenantWritesRefusal)
		gen = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, GenerateName: wire.TenantReaderName}, Rules: reader}
		err = thief.Create(ctx, gen)
		assertRefusedByOneOf(t, err, tenantWritesRefusal)
		// Server-side apply of a new Role (a CREATE through PATCH).
		for _, name := range []string{wire.TenantReaderName + "-ssa", "liqo-resourceslice-ssa"} {
			body, _ := json.Marshal(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
				"metadata": map[string]any{"name": name, "namespace": tn}, "rules": wide})
			err = thief.Patch(ctx, role(tn, name, nil), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("thief"), client.ForceOwnership)
			assertRefusedByOneOf(t, err, tenantWritesRefusal)
		}
	})

	t.Run("UpdateShapes", func(t *testing.T) {
		// The Roles the manager makes, exact: allowed (and now without the RBAC check).
		require.NoError(t, thief.Create(ctx, role(tn, wire.TenantReaderName, reader)))
		require.NoError(t, thief.Create(ctx, role(tn, "liqo-resourceslice-a", access.SliceRules("a"))))
		wideJSON, _ := json.Marshal(wide)
		secretsJSON, _ := json.Marshal(secretsGet)
		for _, name := range []string{wire.TenantReaderName, "liqo-resourceslice-a"} {
			key := client.ObjectKey{Namespace: tn, Name: name}
			ssa, _ := json.Marshal(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
				"metadata": map[string]any{"name": name, "namespace": tn}, "rules": wide})
			for _, tc := range []struct {
				what  string
				patch client.Patch
				opts  []client.PatchOption
			}{
				{"merge patch, rules replaced", client.RawPatch(types.MergePatchType, []byte(`{"rules":`+string(wideJSON)+`}`)), nil},
				{"strategic merge patch, rules replaced", client.RawPatch(types.StrategicMergePatchType, []byte(`{"rules":`+string(wideJSON)+`}`)), nil},
				{"JSON patch, rule appended", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/rules/-","value":`+string(secretsJSON)+`}]`)), nil},
				{"JSON patch, verbs to *", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/rules/0/verbs","value":["*"]}]`)), nil},
				{"JSON patch, resourceNames removed", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/rules/0/resourceNames"}]`)), nil},
				{"JSON patch, resources +secrets", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/rules/0/resources/-","value":"secrets"}]`)), nil},
				{"server-side apply, forced", client.RawPatch(types.ApplyPatchType, ssa), []client.PatchOption{client.FieldOwner("thief"), client.ForceOwnership}},
			} {
				err := thief.Patch(ctx, role(tn, name, nil), tc.patch, tc.opts...)
				var got rbacv1.Role
				require.NoError(t, p.client.Get(ctx, key, &got))
				if !assert.Error(t, err, "BREAK: %s on %s admitted", tc.what, name) {
					t.Logf("BREAK %s on %s: stored rules %+v", tc.what, name, got.Rules)
					continue
				}
				assertRefusedByOneOf(t, err, tenantWritesRefusal)
				if name == wire.TenantReaderName {
					assert.Equal(t, reader, got.Rules, "%s on %s: rules unchanged", tc.what, name)
				}
			}
			// PUT.
			var r rbacv1.Role
			require.NoError(t, thief.Get(ctx, key, &r))
			r.Rules = append(r.Rules, secretsGet)
			assertRefusedByOneOf(t, thief.Update(ctx, &r), tenantWritesRefusal)
		}
		// A wide Role an administrator put in the tenant namespace: the thief may not
		// touch it in a way that keeps its rules (nor rename it to the reader).
		admin := role(tn, "admin-wide", wide)
		require.NoError(t, p.client.Create(ctx, admin))
		assertRefusedByOneOf(t, thief.Patch(ctx, role(tn, "admin-wide", nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`))), tenantWritesRefusal)
		// The administrator's Role is bound to a group the thief is in (every
		// ServiceAccount): rewriting its rules to something wider is refused too.
		require.NoError(t, p.client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "admin-narrow"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "admin-narrow"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:serviceaccounts"}}}))
		require.NoError(t, p.client.Create(ctx, role(tn, "admin-narrow", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}})))
		assertRefusedByOneOf(t, thief.Patch(ctx, role(tn, "admin-narrow", nil), client.RawPatch(types.MergePatchType, []byte(`{"rules":`+string(wideJSON)+`}`))), tenantWritesRefusal)
	})

	t.Run("Bindings", func(t *testing.T) {
		self := []rbacv1.Subject{access.ManagerSubject(liqo)}
		for _, tc := range []struct {
			what string
			rb   *rbacv1.RoleBinding
		}{
			{"reader Role to itself", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.TenantReaderName},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.TenantReaderName}, Subjects: self}},
			{"admin-wide Role to itself", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "x"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "admin-wide"}, Subjects: self}},
			{"reader Role to itself as a User", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.TenantReaderName},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.TenantReaderName},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:serviceaccount:" + liqo + ":" + wire.ManagerName}}}},
			{"slice Role to the serviceaccounts group", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-a"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "liqo-resourceslice-a"},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:serviceaccounts"}}}},
			{"its tenant ClusterRole again under another name", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: liqo, Name: "x"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}, Subjects: self}},
			{"its tenant ClusterRole in the Liqo namespace", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: liqo, Name: wire.ManagerName + "-t"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}, Subjects: self}},
			{"its tenant ClusterRole in default", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: wire.ManagerName},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}, Subjects: self}},
		} {
			err := thief.Create(ctx, tc.rb)
			if !assert.Error(t, err, "BREAK: %s admitted", tc.what) {
				continue
			}
			assert.NotContains(t, err.Error(), "already exists", tc.what)
			t.Logf("%s: %v", tc.what, err)
		}
	})

	t.Run("Namespaces", func(t *testing.T) {
		// Where it is not bound, RBAC refuses before admission.
		for _, ns := range []string{liqo, "default", "kube-system"} {
			assert.False(t, escalateCan(t, thief, ns), ns)
			err := thief.Create(ctx, role(ns, wire.TenantReaderName, wide))
			require.Error(t, err, ns)
			t.Logf("wide Role in %s: %v", ns, err)
		}
		// A namespace creator makes look-alike tenant namespaces (labelled, the API server
		// records it as creator; one unlabelled).
		creator := principal(t, p, "ns-creator", "", rule("", "namespaces", "create"))
		evil := wire.TenantNamespaceName("cl-evil")
		require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evil, Labels: cluster.TenantNamespaceLabels("cl-evil")}}))
		bare := wire.TenantNamespaceName("cl-bare")
		require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bare}}))
		wrong := wire.TenantNamespaceName("cl-wrong")
		require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wrong, Labels: cluster.TenantNamespaceLabels("cl-consumer")}}))
		for _, ns := range []string{evil, bare, wrong} {
			assert.False(t, escalateCan(t, thief, ns), "no escalate in %s before binding", ns)
			err := thief.Create(ctx, role(ns, wire.TenantReaderName, wide))
			require.Error(t, err, ns)
		}
		// The thief binds itself there (its own binding).
		own := func(ns string) *rbacv1.RoleBinding {
			return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.ManagerName},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}, Subjects: []rbacv1.Subject{access.ManagerSubject(liqo)}}
		}
		for _, ns := range []string{evil, bare, wrong} {
			err := thief.Create(ctx, own(ns))
			t.Logf("the thief binds itself in %s: %v", ns, err)
			if err != nil {
				continue
			}
			require.True(t, escalateCan(t, thief, ns), "escalate in %s after its own binding", ns)
			for _, r := range []*rbacv1.Role{
				role(ns, wire.TenantReaderName, wide),
				role(ns, wire.TenantReaderName, append(access.TenantReaderRules("cl-evil"), secretsGet)),
				role(ns, "liqo-resourceslice-z", wide),
				role(ns, "x", wide),
			} {
				createErr := thief.Create(ctx, r)
				if !assert.Error(t, createErr, "BREAK: Role %s/%s with rules %v admitted", ns, r.Name, r.Rules) {
					continue
				}
				assertRefusedByOneOf(t, createErr, tenantWritesRefusal)
			}
			// The exact reader for the namespace's label is all it gets; it held those rules.
			err = thief.Create(ctx, role(ns, wire.TenantReaderName, access.TenantReaderRules("cl-evil")))
			t.Logf("exact reader Role in %s: %v", ns, err)
		}
	})

	// Every Role admission lets the manager write, for any peer label and any slice name,
	// grants only what the manager already holds there: escalate skips a check that
	// could never have failed (hence adds no power), in tn and in a namespace it bound
	// itself in.
	t.Run("AdmittedRolesAreHeld", func(t *testing.T) {
		for _, ns := range []string{tn, wire.TenantNamespaceName("cl-evil")} {
			for _, name := range []string{"", "cl-consumer", "cl-evil", "anything", "*"} {
				for _, r := range append(access.TenantReaderRules(name), access.SliceRules(name)...) {
					for _, v := range r.Verbs {
						for _, rn := range r.ResourceNames {
							assert.True(t, selfCan(t, thief, v, r.APIGroups[0], r.Resources[0], ns, rn),
								"BREAK: admitted rule %s %s/%s %q in %s not held by the manager", v, r.APIGroups[0], r.Resources[0], rn, ns)
						}
					}
				}
			}
		}
	})

	// A Role writer of the tenant namespace squats the reader Role with a right of its
	// own; the manager's repair (ownedrbac.EnsureControlled, as its ServiceAccount)
	// yields exactly the reader's rules, never the union.
	t.Run("RoleWriterSquat", func(t *testing.T) {
		cmGet := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
		writer := principal(t, p, "role-writer", tn, rule(rbacv1.GroupName, "roles", "get", "create", "update", "patch", "delete"), cmGet)
		if err := p.client.Create(ctx, role(tn, wire.TenantReaderName, reader)); err != nil {
			t.Logf("reader Role: %v", err)
		}
		var r rbacv1.Role
		require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.TenantReaderName}, &r))
		r.Rules = []rbacv1.PolicyRule{cmGet}
		require.NoError(t, writer.Update(ctx, &r))
		// Its own escalation is still checked: it cannot squat with rules it lacks.
		r.Rules = append(r.Rules, secretsGet)
		err := writer.Update(ctx, &r)
		require.Error(t, err)
		t.Logf("role writer widening beyond its rules: %v", err)
		owner := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "cl-consumer"}, Spec: authv1beta1.TenantSpec{ClusterID: "cl-consumer"}}
		require.NoError(t, p.client.Create(ctx, owner))
		want := access.AccessObjects(tn, "cl-consumer", []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cl-consumer"}})
		_, err = ownedrbac.EnsureControlled(ctx, thief, thief, owner, want[1:2], false)
		require.NoError(t, err)
		var got rbacv1.Role
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.TenantReaderName}, &got))
		assert.Equal(t, access.TenantReaderRules("cl-consumer"), got.Rules, "the repaired reader Role")
	})

	t.Run("FailClosed", func(t *testing.T) {
		for _, name := range []string{wire.ManagerTenantPolicyName, wire.ManagerBindingPolicyName} {
			var pol admissionregistrationv1.ValidatingAdmissionPolicy
			require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: name}, &pol))
			require.NotNil(t, pol.Spec.FailurePolicy, name)
			assert.Equal(t, admissionregistrationv1.Fail, *pol.Spec.FailurePolicy, name)
			var ops []string
			for _, r := range pol.Spec.MatchConstraints.ResourceRules {
				for _, o := range r.Operations {
					ops = append(ops, string(o))
				}
			}
			assert.Contains(t, ops, "CREATE", name)
			assert.Contains(t, ops, "UPDATE", name)
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: name}, &b))
			assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions, name)
			assert.Nil(t, b.Spec.MatchResources, name)
			assert.Nil(t, b.Spec.ParamRef, name)
		}
		// A Role large enough that evaluating every rule would be costly: the size test
		// comes first; whatever the outcome (refusal or CEL error), it must not be admitted.
		many := make([]rbacv1.PolicyRule, 0, 3000)
		for i := 0; i < 3000; i++ {
			many = append(many, rbacv1.PolicyRule{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"},
				ResourceNames: []string{fmt.Sprintf("n%d", i)}, Verbs: []string{"get", "list", "watch", "delete"}})
		}
		err := thief.Create(ctx, role(tn, "liqo-resourceslice-big", many))
		require.Error(t, err)
		t.Logf("big Role: %.300s", err)
	})
}
