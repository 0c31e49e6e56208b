package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Attacks on 81d6afc (ownedrbac.DeleteOrphans: the finalize and the reconcile of a gone
// owner's name also delete the objects of its names that nothing controls and that carry
// the labels they were forged with; EnsureControlled replaces an object it does not
// control). Each test asserts the secure behaviour: it passes when the attack is refused.
// The provider runs the provider controllers in-process (the reconcilers the manager runs).

// a53WarmGC waits until the garbage collector of p handles ResourceSlices (warmGC); the
// probe slice is no provider copy, so the controllers ignore it.
func a53WarmGC(t *testing.T, p *site) {
	t.Helper()
	warmGC(t, p, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "a53-gc-probe"}}, "ResourceSlice")
}

// a53SliceAccess describes the Role and RoleBinding of slice name in ns (the names the
// manager gives them), with their controller: "" when there is neither.
func a53SliceAccess(t *testing.T, p *site, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: wire.SliceAccessName(name)}
	var out []string
	for _, o := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		if err := p.client.Get(ctx, key, o); err != nil {
			require.True(t, apierrors.IsNotFound(err), "reading %T %s: %v", o, key, err)
			continue
		}
		ctl := "none"
		if ref := metav1.GetControllerOf(o); ref != nil {
			ctl = fmt.Sprintf("%s %s uid %s", ref.Kind, ref.Name, ref.UID)
		}
		out = append(out, fmt.Sprintf("%T %s (controller: %s, labels %v)", o, key, ctl, o.GetLabels()))
	}
	return strings.Join(out, "; ")
}

// a53SliceAllowed lists what of SliceRules(name) in ns the slice's identity (user, groups)
// may still do.
func a53SliceAllowed(t *testing.T, p *site, ns, name, user string, groups []string) []string {
	t.Helper()
	allowed, err := revocation.AllowedActions(context.Background(), p.client, user, groups, ns, access.SliceRules(name))
	require.NoError(t, err)
	return allowed
}

// a53IssuedSlice has the tenant's identity (as) create slice name, a provider copy of
// consumer a, and waits until its certificate is issued; it returns the slice and its
// identity's user and groups (as its certificate says).
func a53IssuedSlice(t *testing.T, p *site, as client.Client, a *attacker, ns, name string) (*authv1beta1.ResourceSlice, string, []string) {
	t.Helper()
	ctx := context.Background()
	rs := providerCopy(ns, name, a.id, sliceCSR(t, a.key, authn.SliceUserName(name, a.id), a.id))
	require.NoError(t, as.Create(ctx, rs))
	eventually(t, 30*time.Second, "slice "+name+" is issued", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
		return err == nil && rs.Status.AuthParams.HasCertificate(), err
	})
	cert, err := authn.ParseCertificate(rs.Status.AuthParams.SignedCRT)
	require.NoError(t, err)
	require.NotEmpty(t, controlledBindings(t, p, ns, string(rs.UID)), "the slice controls its binding")
	user, groups := cert.Subject.CommonName, cert.Subject.Organization
	require.NotEmpty(t, a53SliceAllowed(t, p, ns, name, user, groups), "the slice's identity reads its slice")
	return rs, user, groups
}

// TestAttack53SliceDeletedWithOrphanPropagation: attack52's Orphan deletion on the
// provider's copy of a slice. The tenant's own certificate identity (it writes the slices
// of its tenant namespace), or a slice writer of the tenant namespace, deletes an accepted
// slice, issued and bound, with propagationPolicy Orphan: the garbage collector strips the
// slice's controller reference from its Role and RoleBinding, racing the manager's
// finalize. Secure behaviour: once the slice is gone, no Role or RoleBinding of it is
// left, and its identity may do nothing of SliceRules.
func TestAttack53SliceDeletedWithOrphanPropagation(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p, alice, ta, asAlice := grantedTenant(t, "a53-orphan", "cl-alice53o")
	ctx := context.Background()
	a53WarmGC(t, p)
	ns := ta.Namespace
	writer := principal(t, p, "slice-writer", ns, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "delete"))
	var leftovers []string
	for i := range 6 {
		name := fmt.Sprintf("orphan%d", i)
		rs, user, groups := a53IssuedSlice(t, p, asAlice, alice, ns, name)
		uid := string(rs.UID)
		who, deleter := "the tenant's certificate identity", client.Client(asAlice)
		if i%2 == 1 {
			who, deleter = "a slice writer of the tenant namespace", writer
		}
		require.NoError(t, deleter.Delete(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
			client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		eventually(t, 30*time.Second, "the slice is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{})), nil
		})
		time.Sleep(3 * time.Second)
		left := a53SliceAccess(t, p, ns, name)
		allowed := a53SliceAllowed(t, p, ns, name, user, groups)
		if left != "" || len(allowed) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("try %d (%s deleted with propagationPolicy=Orphan): slice %s/%s (uid %s) is gone; left %q; user %q (groups %v) may still %v",
				i, who, ns, name, uid, left, user, groups, allowed))
		}
	}
	assert.Empty(t, leftovers, "no Role or RoleBinding outlives a slice deleted with propagationPolicy=Orphan")
}

// TestAttack53RelabelledSliceHeldAndOrphaned: the orphans a slice's finalize deletes are
// told by the labels they were forged with, the slice's consumer among them, and that
// consumer is read from the slice, which its tenant writes (spec.consumerClusterID is
// mutable). The tenant's own certificate identity, holding an accepted slice, renames its
// consumer (the slice is then denied as misplaced, which takes nothing back) and adds a
// finalizer of its own (every other try it also drops the provider's, which a misplaced
// slice does not get again), then deletes the slice with propagationPolicy Orphan: the
// garbage collector strips the controller reference, and the finalize, looking for
// orphans of the renamed consumer, passes over them; held by the tenant's finalizer, the
// slice never reaches the reconcile of a gone name. Secure behaviour: a slice in deletion
// keeps no Role or RoleBinding, and its identity may do nothing of SliceRules; nor once
// the administrator drains the tenant.
func TestAttack53RelabelledSliceHeldAndOrphaned(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p, alice, ta, asAlice := grantedTenant(t, "a53-relabel", "cl-alice53r")
	ctx := context.Background()
	a53WarmGC(t, p)
	ns := ta.Namespace
	const hold = "attacker.example/hold"
	type kept struct {
		name, user string
		groups     []string
	}
	var leftovers []string
	var held []kept
	for i := range 8 {
		name := fmt.Sprintf("relabel%d", i)
		rs, user, groups := a53IssuedSlice(t, p, asAlice, alice, ns, name)
		uid := string(rs.UID)

		// The attack, as the tenant's own identity.
		got := &authv1beta1.ResourceSlice{}
		require.NoError(t, asAlice.Get(ctx, client.ObjectKeyFromObject(rs), got))
		got.Spec.ConsumerClusterID = ptrClusterID("cl-elsewhere53")
		if i%2 == 1 {
			got.Finalizers = []string{hold}
		} else {
			got.Finalizers = append(got.Finalizers, hold)
		}
		require.NoError(t, asAlice.Update(ctx, got))
		eventually(t, 20*time.Second, "slice "+name+" is denied as misplaced", func(ctx context.Context) (bool, error) {
			if err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
				return false, err
			}
			c := authv1beta1.SliceCondition(got.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication)
			return got.Status.ObservedGeneration == got.Generation && c != nil && c.Status == authv1beta1.ResourceSliceDenied, nil
		})
		t.Logf("try %d: denied as misplaced (finalizers %v), the slice keeps %q", i, got.Finalizers, a53SliceAccess(t, p, ns, name))
		require.NoError(t, asAlice.Delete(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
			client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		time.Sleep(3 * time.Second)

		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(rs), got), "the tenant's finalizer holds the slice")
		require.NotNil(t, got.DeletionTimestamp)
		left := a53SliceAccess(t, p, ns, name)
		allowed := a53SliceAllowed(t, p, ns, name, user, groups)
		if left != "" || len(allowed) > 0 {
			held = append(held, kept{name, user, groups})
			leftovers = append(leftovers, fmt.Sprintf("try %d: slice %s/%s (uid %s) in deletion (finalizers %v, consumer renamed %q) keeps %q; user %q (groups %v) may still %v",
				i, ns, name, uid, got.Finalizers, *got.Spec.ConsumerClusterID, left, user, groups, allowed))
			if len(leftovers) >= 2 {
				break
			}
		}
	}
	if len(held) > 0 {
		// The administrator drains the tenant: its slices are deleted, its access revoked.
		setTenantCondition(t, p, client.ObjectKeyFromObject(ta), authv1beta1.TenantConditionDrained)
		waitAccess(t, p, client.ObjectKeyFromObject(ta), false, "AccessRevoked")
		time.Sleep(3 * time.Second)
		for _, k := range held {
			if left, allowed := a53SliceAccess(t, p, ns, k.name), a53SliceAllowed(t, p, ns, k.name, k.user, k.groups); left != "" || len(allowed) > 0 {
				leftovers = append(leftovers, fmt.Sprintf("after the tenant was Drained: slice %s/%s still keeps %q; user %q may still %v", ns, k.name, left, k.user, allowed))
			}
		}
	}
	assert.Empty(t, leftovers, "a slice in deletion keeps no access, whatever consumer its tenant wrote on it")
}

// a53ReadyTenant is a52ReadyTenant that also returns the nonce, for the Tenant to be made
// again under its name.
func a53ReadyTenant(t *testing.T, p *site, id string) (*attacker, client.WithWatch, *authv1beta1.Tenant, string) {
	t.Helper()
	a := newAttacker(t, id)
	tn, nonce := freshNonce(t, p, id)
	peer := attack48PeeringUser(t, p, id, tn)
	tenant := a.honestTenant(t, tn, nonce)
	tenant.Finalizers = []string{wire.TenantFinalizer}
	require.NoError(t, cluster.Apply(context.Background(), peer, tenant, wire.FieldOwner))
	return a, peer, a53WaitReady(t, p, client.ObjectKeyFromObject(tenant)), nonce
}

func a53WaitReady(t *testing.T, p *site, key client.ObjectKey) *authv1beta1.Tenant {
	t.Helper()
	got := &authv1beta1.Tenant{}
	eventually(t, 30*time.Second, "the Tenant "+key.String()+" is Ready", func(ctx context.Context) (bool, error) {
		if err := p.client.Get(ctx, key, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady), nil
	})
	return got
}

// a53Uncontrolled lists the RoleBindings and Roles of ns that nothing controls and that
// carry this project's label, but the manager's own binding (liqoctl's, never controlled).
func a53Uncontrolled(t *testing.T, p *site, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var rbs rbacv1.RoleBindingList
	require.NoError(t, p.client.List(ctx, &rbs, client.InNamespace(ns), client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}))
	for _, b := range rbs.Items {
		if metav1.GetControllerOf(&b) == nil && b.Name != wire.ManagerName {
			out = append(out, "RoleBinding "+b.Name)
		}
	}
	var roles rbacv1.RoleList
	require.NoError(t, p.client.List(ctx, &roles, client.InNamespace(ns), client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}))
	for _, r := range roles.Items {
		if metav1.GetControllerOf(&r) == nil {
			out = append(out, "Role "+r.Name)
		}
	}
	return out
}

// TestAttack53RecreatedTenantKeepsItsAccess: the orphan rule must not take the access of
// a new Tenant of the same name. The peering user of C deletes its Ready Tenant with
// propagationPolicy Orphan and, the moment it is gone, applies it again (as liqoctl
// authenticate does, its signed nonce presented again), so that the new Tenant's
// reconcile meets the old one's orphans and the reconcile of the gone name. Secure
// behaviour for the honest consumer: once settled, the new Tenant controls its bindings,
// its cluster ID may do the control plane's actions, and nothing is left uncontrolled.
func TestAttack53RecreatedTenantKeepsItsAccess(t *testing.T) {
	// Serial: its tries settle for 3 s before the access is checked: a manager slowed by other tests would look like a loss.
	p := attack47Provider(t, "a53-retenant")
	ctx := context.Background()
	a52WarmGC(t, p)
	var wrong []string
	for i := range 4 {
		id := fmt.Sprintf("cl-a53t%d", i)
		a, peer, got, nonce := a53ReadyTenant(t, p, id)
		tn, key := got.Namespace, client.ObjectKeyFromObject(got)
		oldUID := string(got.UID)
		require.NoError(t, peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}},
			client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		eventually(t, 30*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, key, &authv1beta1.Tenant{})), nil
		})
		again := a.honestTenant(t, tn, nonce)
		again.Finalizers = []string{wire.TenantFinalizer}
		require.NoError(t, cluster.Apply(ctx, peer, again, wire.FieldOwner))
		now := a53WaitReady(t, p, key)
		require.NotEqual(t, oldUID, string(now.UID))
		time.Sleep(3 * time.Second)
		require.NoError(t, p.client.Get(ctx, key, now))
		cert, err := authn.ParseCertificate(now.Status.AuthParams.SignedCRT)
		require.NoError(t, err)
		allowed, err := revocation.AllowedActions(ctx, p.client, id, cert.Subject.Organization, tn, access.ControlPlaneRules())
		require.NoError(t, err)
		mine := controlledBindings(t, p, tn, string(now.UID))
		stray := a53Uncontrolled(t, p, tn)
		old := controlledBindings(t, p, tn, oldUID)
		if len(mine) < 2 || len(allowed) < len(revocation.Actions(access.ControlPlaneRules(), tn)) || len(stray) > 0 || len(old) > 0 {
			wrong = append(wrong, fmt.Sprintf("try %d: the new Tenant %s/%s (uid %s) controls %v, its cluster may %d of %d actions; uncontrolled %v; the old one's %v",
				i, tn, id, now.UID, mine, len(allowed), len(revocation.Actions(access.ControlPlaneRules(), tn)), stray, old))
		}
	}
	assert.Empty(t, wrong, "a Tenant made again after its namesake was orphaned has its own access, and only that")
}

// TestAttack53RecreatedSliceKeepsItsAccess: the same for a slice: the tenant's identity
// deletes its accepted slice with propagationPolicy Orphan and makes it again under its
// name at once (a fresh CSR), racing the reconcile of the gone name (the orphans' cleanup)
// with the new slice's grant. Secure behaviour: once settled, the new slice controls its
// Role and RoleBinding and its identity reads its slice; nothing is left uncontrolled.
func TestAttack53RecreatedSliceKeepsItsAccess(t *testing.T) {
	// Serial: its tries settle for 3 s before the access is checked: a manager slowed by other tests would look like a loss.
	p, alice, ta, asAlice := grantedTenant(t, "a53-reslice", "cl-alice53s")
	ctx := context.Background()
	a53WarmGC(t, p)
	ns := ta.Namespace
	var wrong []string
	for i := range 6 {
		name := fmt.Sprintf("again%d", i)
		rs, _, _ := a53IssuedSlice(t, p, asAlice, alice, ns, name)
		oldUID := rs.UID
		require.NoError(t, asAlice.Delete(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
			client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		for {
			err := asAlice.Get(ctx, client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{})
			if apierrors.IsNotFound(err) {
				break
			}
			require.NoError(t, err)
			time.Sleep(time.Duration(i%3) * 5 * time.Millisecond)
		}
		again := providerCopy(ns, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
		require.NoError(t, asAlice.Create(ctx, again))
		eventually(t, 30*time.Second, "slice "+name+" is issued again", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(again), again)
			return err == nil && again.UID != oldUID && again.Status.AuthParams.HasCertificate(), err
		})
		time.Sleep(3 * time.Second)
		cert, err := authn.ParseCertificate(again.Status.AuthParams.SignedCRT)
		require.NoError(t, err)
		allowed := a53SliceAllowed(t, p, ns, name, cert.Subject.CommonName, cert.Subject.Organization)
		objs := a53SliceAccess(t, p, ns, name)
		mine := controlledBindings(t, p, ns, string(again.UID))
		if len(mine) != 1 || len(allowed) == 0 || strings.Count(objs, string(again.UID)) != 2 {
			wrong = append(wrong, fmt.Sprintf("try %d: the new slice %s/%s (uid %s): access %q, its identity may %v", i, ns, name, again.UID, objs, allowed))
		}
	}
	assert.Empty(t, wrong, "a slice made again after its namesake was orphaned has its own access")
}

// TestAttack53RoleWriterPlantsASliceRole: a Role writer of the tenant namespace (Roles
// labelled as this project's, with rules it holds) makes, before the tenant's slice X
// exists, the Role liqo-resourceslice-X with the slice's rules and labels, nothing
// controlling it, recording a grant far larger than the slice will ask: before the change
// an object of the right access was kept whoever controlled it. Secure behaviour: once the
// slice is accepted, its Role is the manager's (controlled by the slice, recording what
// the slice asked), and the slice's grant is no larger than it asked.
func TestAttack53RoleWriterPlantsASliceRole(t *testing.T) {
	// Serial: it settles for 2 s before it checks the planted Role: a manager slowed by other tests would look like a leak.
	p, alice, ta, asAlice := grantedTenant(t, "a53-plant", "cl-alice53p")
	ctx := context.Background()
	ns := ta.Namespace
	writer := principal(t, p, "role-writer", ns, rule(rbacv1.GroupName, "roles", "create", "get", "update"),
		rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "list", "watch"))
	const name = "planted"
	planted := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wire.SliceAccessName(name), Namespace: ns,
		Labels:      map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: alice.id, wire.SliceNameLabel: name},
		Annotations: map[string]string{wire.GrantedResourcesAnnotation: `{"cpu":"1k"}`}}, Rules: access.SliceRules(name)}
	require.NoError(t, writer.Create(ctx, planted), "the Role writer plants the slice's Role")
	rs, _, _ := a53IssuedSlice(t, p, asAlice, alice, ns, name)
	time.Sleep(2 * time.Second)
	role := &rbacv1.Role{}
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(planted), role))
	assert.True(t, metav1.IsControlledBy(role, rs), "the slice's Role is controlled by the slice, not the one planted (controller %v)", metav1.GetControllerOf(role))
	granted, ok := access.SliceGrant(role)
	require.True(t, ok)
	assert.True(t, granted.Cpu().Equal(resource.MustParse("1")), "the grant is what the slice asked (cpu 1), not what was planted: %v", granted)
}

// a53TouchSlice patches a label of slice key as c (the tenant), so that the slice is
// reconciled; used to show the tenant's writes do not make the manager delete more.
func a53TouchSlice(ctx context.Context, c client.Client, key client.ObjectKey, n int) error {
	return c.Patch(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"attacker.example/n":"%d"}}}`, n))))
}

// TestAttack53OrphanCleanupSparesTheHonestSlice: the tenant writes a slice that claims
// another slice's name only through its consumer label (a slice named after the honest
// one cannot exist twice), and deletes it with propagationPolicy Orphan again and again,
// each deletion a reconcile of a gone name in the tenant namespace, the orphan cleanup
// looking for objects of its name. Secure behaviour: the honest slice's Role and
// RoleBinding, which its own slice controls, are never deleted: the slice's identity keeps
// reading its slice throughout.
func TestAttack53OrphanCleanupSparesTheHonestSlice(t *testing.T) {
	// Serial: it settles for 3 s before it checks the honest slice's access: a manager slowed by other tests would look like a loss.
	p, alice, ta, asAlice := grantedTenant(t, "a53-spare", "cl-alice53h")
	ctx := context.Background()
	ns := ta.Namespace
	honest, user, groups := a53IssuedSlice(t, p, asAlice, alice, ns, "honest")
	roleUID := func() types.UID {
		r := &rbacv1.RoleBinding{}
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.SliceAccessName("honest")}, r))
		return r.UID
	}
	before := roleUID()
	for i := range 20 {
		name := fmt.Sprintf("churn%d", i)
		rs := providerCopy(ns, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
		rs.Labels[wire.SliceNameLabel] = "honest"
		require.NoError(t, asAlice.Create(ctx, rs))
		require.NoError(t, a53TouchSlice(ctx, asAlice, client.ObjectKeyFromObject(honest), i))
		require.NoError(t, client.IgnoreNotFound(asAlice.Delete(ctx, rs, client.PropagationPolicy(metav1.DeletePropagationOrphan))))
	}
	time.Sleep(3 * time.Second)
	assert.NotEmpty(t, a53SliceAllowed(t, p, ns, "honest", user, groups), "the honest slice's identity still reads its slice")
	assert.Equal(t, before, roleUID(), "the honest slice's binding was never replaced")
}
