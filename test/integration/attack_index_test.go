package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// Attacks on e8e8435: the binding scan before each issuance (and the revocation proof of a
// Drained tenant) reads the manager's cache index of bindings by subject instead of every
// binding. The weakest principals that may write bindings (a RoleBinding writer of a team
// namespace, a ClusterRoleBinding writer, a namespace creator) try to leave a binding that
// RBAC honours but the index does not list: written before and after the controllers
// start, updated, patched every way, applied, re-created, with the user among many
// subjects, naming group liqo.io or a key group, in a namespace made after the start, among
// many bindings. Each case passing means the scan found the binding.

var idxViewBind = rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"idx-view"}}

func idxRB(ns, name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "idx-view"}}
}

func idxCRB(name string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "idx-view"}}
}

// idxViewRole makes the ClusterRole the bindings grant: listing pods (the control planes
// run without the bootstrap roles' aggregation).
func idxViewRole(t *testing.T, p *site) {
	require.NoError(t, p.client.Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "idx-view"},
		Rules: []rbacv1.PolicyRule{rule("", "pods", "get", "list")}}))
}

func idxUser(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

func idxGroup(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: name}
}

func idxSA(ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}
}

// idxMayView asks the API server whether user with groups may list pods in ns: that RBAC
// honours the binding under test.
func idxMayView(t *testing.T, p *site, user string, groups []string, ns string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "pods"}}}
	require.NoError(t, p.client.Create(context.Background(), sar))
	return sar.Status.Allowed
}

// idxKeyBoundTenant is a's Tenant with a key-bound request: its certificate would carry
// the key group KeyGroup(a.id, a.key).
func idxKeyBoundTenant(t *testing.T, a *attacker, tn, nonce string) *authv1beta1.Tenant {
	tenant := a.honestTenant(t, tn, nonce)
	csr, err := authn.ForgeKeyBoundCSRFor(a.key, a.id, wire.UserGroup)
	require.NoError(t, err)
	tenant.Spec.CSR = csr
	return tenant
}

// idxExpectRefused runs a's handshake (keyBound: with a key-bound request) and checks that
// no certificate is issued because of the binding want names.
func idxExpectRefused(t *testing.T, p *site, a *attacker, keyBound bool, want string) {
	t.Helper()
	ns, nonce := freshNonce(t, p, a.id)
	tn := a.honestTenant(t, ns, nonce)
	if keyBound {
		tn = idxKeyBoundTenant(t, a, ns, nonce)
	}
	require.NoError(t, p.client.Create(context.Background(), tn))
	msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(tn), authv1beta1.ConditionCertificateIssued, metav1.ConditionFalse, authv1beta1.ReasonClusterIDHasPermissions)
	assert.Contains(t, msg, want)
	assertNoCSRApproved(t, p, a.id)
	got := &authv1beta1.Tenant{}
	require.NoError(t, p.client.Get(context.Background(), client.ObjectKeyFromObject(tn), got))
	assert.Nil(t, got.Status.AuthParams)
}

// idxPrepare writes, as the administrator, what must exist before the controllers start:
// a team namespace and a binding naming cl-pre as the third of its subjects.
func idxPrepare(t *testing.T, p *site) {
	ctx := context.Background()
	idxViewRole(t, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
	require.NoError(t, p.client.Create(ctx, idxRB("team-a", "pre-existing", idxSA("team-a"), idxGroup("devs"), idxUser("cl-pre"))))
}

// idxAttacks are the cases, against a provider whose controllers run (idxPrepare first).
func idxAttacks(t *testing.T, p *site) {
	ctx := context.Background()
	rbw := principal(t, p, "rb-writer", "team-a", rule(rbacv1.GroupName, "rolebindings", "create", "get", "list", "update", "patch", "delete"), idxViewBind)
	crbw := principal(t, p, "crb-writer", "", rule(rbacv1.GroupName, "clusterrolebindings", "create", "get", "list", "update", "patch", "delete"), idxViewBind)
	nsc := principal(t, p, "ns-creator", "", rule("", "namespaces", "create", "get"))

	viewed := func(t *testing.T, user string, groups []string, ns string) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("RBAC honours the binding for %s %v", user, groups), func(context.Context) (bool, error) {
			return idxMayView(t, p, user, groups, ns), nil
		})
	}
	inTeam := func(name string) string { return fmt.Sprintf(`RoleBinding %q in namespace "team-a"`, name) }

	t.Run("made before the controllers started, user third", func(t *testing.T) {
		viewed(t, "cl-pre", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-pre"), false, inTeam("pre-existing"))
	})
	t.Run("RoleBinding writer creates, user last of several", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "created", idxSA("team-a"), idxUser("someone"), idxGroup("devs"), idxUser("cl-create"))))
		viewed(t, "cl-create", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-create"), false, inTeam("created"))
	})
	t.Run("RoleBinding writer updates a decoy to add the user", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "decoy-update", idxUser("someone"))))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var b rbacv1.RoleBinding
			if err := rbw.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "decoy-update"}, &b); err != nil {
				return err
			}
			b.Subjects = append(b.Subjects, idxUser("cl-update"))
			return rbw.Update(ctx, &b)
		}))
		viewed(t, "cl-update", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-update"), false, inTeam("decoy-update"))
	})
	for _, pc := range []struct {
		id    string
		patch client.Patch
		opts  []client.PatchOption
	}{
		{"cl-merge", client.RawPatch(types.MergePatchType, []byte(`{"subjects":[{"kind":"ServiceAccount","name":"default","namespace":"team-a"},{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-merge"}]}`)), nil},
		{"cl-smp", client.RawPatch(types.StrategicMergePatchType, []byte(`{"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"someone"},{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-smp"}]}`)), nil},
		{"cl-json", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/subjects/0/name","value":"cl-json"}]`)), nil},
		{"cl-jsonadd", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/subjects/-","value":{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-jsonadd"}}]`)), nil},
		{"cl-ssa", client.RawPatch(types.ApplyPatchType, []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"decoy-cl-ssa","namespace":"team-a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"idx-view"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"devs"},{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-ssa"}]}`)),
			[]client.PatchOption{client.FieldOwner("rb-writer"), client.ForceOwnership}},
	} {
		t.Run("RoleBinding writer patches a decoy: "+pc.id, func(t *testing.T) {
			name := "decoy-" + pc.id
			require.NoError(t, rbw.Create(ctx, idxRB("team-a", name, idxUser("someone"))))
			require.NoError(t, rbw.Patch(ctx, idxRB("team-a", name), pc.patch, pc.opts...))
			viewed(t, pc.id, nil, "team-a")
			idxExpectRefused(t, p, newAttacker(t, pc.id), false, inTeam(name))
		})
	}
	t.Run("server-side apply creates the binding", func(t *testing.T) {
		body := []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"applied","namespace":"team-a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"idx-view"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-apply"}]}`)
		require.NoError(t, rbw.Patch(ctx, idxRB("team-a", "applied"), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("rb-writer")))
		viewed(t, "cl-apply", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-apply"), false, inTeam("applied"))
	})
	t.Run("deleted and re-created with the same name", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "recreated", idxUser("someone"))))
		require.NoError(t, rbw.Delete(ctx, idxRB("team-a", "recreated")))
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "recreated", idxUser("cl-recreate"))))
		viewed(t, "cl-recreate", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-recreate"), false, inTeam("recreated"))
	})
	t.Run("subject named twice, then one removed", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "twice", idxUser("cl-dup"), idxUser("cl-dup"))))
		require.NoError(t, rbw.Patch(ctx, idxRB("team-a", "twice"), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/subjects/0"}]`))))
		viewed(t, "cl-dup", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-dup"), false, inTeam("twice"))
	})
	t.Run("renamed away and back", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "flip", idxUser("cl-flip"))))
		require.NoError(t, rbw.Patch(ctx, idxRB("team-a", "flip"), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/subjects/0/name","value":"other"}]`))))
		require.NoError(t, rbw.Patch(ctx, idxRB("team-a", "flip"), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/subjects/0/name","value":"cl-flip"}]`))))
		viewed(t, "cl-flip", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-flip"), false, inTeam("flip"))
	})
	t.Run("subject apiGroup left empty (defaulted)", func(t *testing.T) {
		require.NoError(t, rbw.Create(ctx, idxRB("team-a", "nogroup", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "cl-nogroup"})))
		viewed(t, "cl-nogroup", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-nogroup"), false, inTeam("nogroup"))
	})
	t.Run("other spellings of kind and apiGroup", func(t *testing.T) {
		for i, s := range []rbacv1.Subject{
			{APIGroup: rbacv1.GroupName, Kind: "user", Name: "cl-spell"},
			{APIGroup: rbacv1.GroupName, Kind: "USER", Name: "cl-spell"},
			{APIGroup: "rbac.authorization.k8s.io/v1", Kind: rbacv1.UserKind, Name: "cl-spell"},
			{APIGroup: "RBAC.authorization.k8s.io", Kind: rbacv1.UserKind, Name: "cl-spell"},
			{APIGroup: "", Kind: rbacv1.GroupKind, Name: wire.UserGroup},
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cl-spell "},
		} {
			name := fmt.Sprintf("spell-%d", i)
			err := rbw.Create(ctx, idxRB("team-a", name, s))
			if err != nil {
				t.Logf("%+v refused: %v", s, err)
				continue
			}
			time.Sleep(2 * time.Second) // the API server's authorizer follows bindings through its own cache
			honoured := idxMayView(t, p, "cl-spell", []string{wire.UserGroup}, "team-a")
			t.Logf("%+v accepted; RBAC honours it for cl-spell/liqo.io: %v", s, honoured)
			if honoured {
				idxExpectRefused(t, p, newAttacker(t, fmt.Sprintf("cl-spell%d", i)), false, inTeam(name))
			}
			require.NoError(t, rbw.Delete(ctx, idxRB("team-a", name)))
		}
	})
	t.Run("namespace creator binds in a namespace made after the start", func(t *testing.T) {
		require.NoError(t, nsc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-new"}}))
		owner := principal(t, p, "ns-creator", "team-new", rule(rbacv1.GroupName, "rolebindings", "create", "get", "update", "patch"), idxViewBind)
		require.NoError(t, owner.Create(ctx, idxRB("team-new", "fresh", idxGroup("x"), idxUser("cl-newns"))))
		viewed(t, "cl-newns", nil, "team-new")
		idxExpectRefused(t, p, newAttacker(t, "cl-newns"), false, `RoleBinding "fresh" in namespace "team-new"`)
	})
	t.Run("among many bindings", func(t *testing.T) {
		for i := range 300 {
			subjects := []rbacv1.Subject{idxUser(fmt.Sprintf("u%d", i)), idxGroup(fmt.Sprintf("g%d", i))}
			if i == 157 {
				subjects = append(subjects, idxUser("cl-many"))
			}
			require.NoError(t, rbw.Create(ctx, idxRB("team-a", fmt.Sprintf("many-%03d", i), subjects...)))
		}
		viewed(t, "cl-many", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-many"), false, inTeam("many-157"))
	})
	t.Run("ClusterRoleBinding writer updates a decoy to name a key group", func(t *testing.T) {
		a := newAttacker(t, "cl-keygroup")
		group, err := authn.KeyGroup(a.id, a.key.Public())
		require.NoError(t, err)
		require.NoError(t, crbw.Create(ctx, idxCRB("decoy-keygroup", idxUser("someone"))))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var b rbacv1.ClusterRoleBinding
			if err := crbw.Get(ctx, client.ObjectKey{Name: "decoy-keygroup"}, &b); err != nil {
				return err
			}
			b.Subjects = append([]rbacv1.Subject{idxGroup("g")}, append(b.Subjects, idxGroup(group))...)
			return crbw.Update(ctx, &b)
		}))
		viewed(t, a.id, []string{wire.UserGroup, group}, "team-a")
		require.False(t, idxMayView(t, p, a.id, []string{wire.UserGroup}, "team-a"), "only the key group is bound")
		idxExpectRefused(t, p, a, true, `ClusterRoleBinding "decoy-keygroup"`)
	})
	t.Run("ClusterRoleBinding writer: one binding naming another user, then the user and group liqo.io", func(t *testing.T) {
		require.NoError(t, crbw.Create(ctx, idxCRB("both", idxUser("someone"))))
		require.NoError(t, crbw.Patch(ctx, idxCRB("both"), client.RawPatch(types.MergePatchType,
			[]byte(`{"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"someone"},{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"cl-both"},{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"liqo.io"}]}`))))
		viewed(t, "cl-both", nil, "team-a")
		idxExpectRefused(t, p, newAttacker(t, "cl-both"), false, `ClusterRoleBinding "both" (ClusterRole "idx-view" to User "cl-both")`)
		// Group liqo.io alone keeps every consumer from a certificate.
		idxExpectRefused(t, p, newAttacker(t, "cl-any"), false, `ClusterRoleBinding "both" (ClusterRole "idx-view" to Group "liqo.io")`)
		require.NoError(t, crbw.Delete(ctx, idxCRB("both")))
	})
	t.Run("a fresh cluster ID is still served", func(t *testing.T) {
		honestHandshake(t, p, newAttacker(t, "cl-fresh"))
	})
}

// TestAttackIndexInProcess: the cases against liqoctl's in-process provider controllers.
func TestAttackIndexInProcess(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "idx-provider")
	p := installSites(t, cps, "cl-provider")[0]
	idxPrepare(t, p)
	startControllers(t, p, authmanager.Provider)
	idxAttacks(t, p)
}

// TestAttackIndexManager: the cases against liqo-auth-manager.
func TestAttackIndexManager(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "idxm-provider")
	p := installSites(t, cps, "cl-provider")[0]
	idxPrepare(t, p)
	startManager(t, p, "--api-server-url", p.cp.URL)
	idxAttacks(t, p)
}

// TestAttackIndexRevocationProof: after a tenant's handshake, a RoleBinding writer updates a
// binding of its team namespace to name the tenant's user, and a ClusterRoleBinding writer
// JSON-patches one to name group liqo.io, while the controllers run. Drained, the tenant's
// revocation proof must list both; once they are gone, it is revoked.
func TestAttackIndexRevocationProof(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "idxr-provider")
	p := installSites(t, cps, "cl-provider")[0]
	ctx := context.Background()
	idxViewRole(t, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
	startControllers(t, p, authmanager.Provider)
	a := newAttacker(t, "cl-drain")
	honest := honestHandshake(t, p, a)
	key := client.ObjectKeyFromObject(honest)

	rbw := principal(t, p, "rb-writer", "team-a", rule(rbacv1.GroupName, "rolebindings", "create", "get", "update", "patch", "delete"), idxViewBind)
	crbw := principal(t, p, "crb-writer", "", rule(rbacv1.GroupName, "clusterrolebindings", "create", "get", "update", "patch", "delete"), idxViewBind)
	require.NoError(t, rbw.Create(ctx, idxRB("team-a", "late-leftover", idxUser("someone"))))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var b rbacv1.RoleBinding
		if err := rbw.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "late-leftover"}, &b); err != nil {
			return err
		}
		b.Subjects = append(b.Subjects, idxUser(a.id))
		return rbw.Update(ctx, &b)
	}))
	require.NoError(t, crbw.Create(ctx, idxCRB("late-group", idxUser("someone"))))
	require.NoError(t, crbw.Patch(ctx, idxCRB("late-group"), client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/subjects/-","value":{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"liqo.io"}}]`))))
	eventually(t, 10*time.Second, "RBAC honours the leftover binding", func(context.Context) (bool, error) {
		return idxMayView(t, p, a.id, nil, "team-a"), nil
	})

	setTenantCondition(t, p, key, authv1beta1.TenantConditionDrained)
	waitAccess(t, p, key, true, authv1beta1.ReasonAccessStillAllowed)
	var got authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, key, &got))
	msg := ""
	for _, c := range got.Status.Conditions {
		if c.Type == authv1beta1.ConditionAccessGranted {
			msg = c.Message
		}
	}
	assert.Contains(t, msg, `RoleBinding "late-leftover" in namespace "team-a" (ClusterRole "idx-view" to User "cl-drain")`)
	assert.Contains(t, msg, `ClusterRoleBinding "late-group" (ClusterRole "idx-view" to Group "liqo.io")`)

	require.NoError(t, rbw.Delete(ctx, idxRB("team-a", "late-leftover")))
	require.NoError(t, crbw.Delete(ctx, idxCRB("late-group")))
	// Touch the Tenant so that it is reconciled again (the bindings are not its own).
	setTenantCondition(t, p, key, authv1beta1.TenantConditionCordoned)
	setTenantCondition(t, p, key, authv1beta1.TenantConditionDrained)
	waitAccess(t, p, key, false, authv1beta1.ReasonAccessRevoked)
}
