package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Attacks on f2212ad (finalize for every slice being deleted, not a copy, or naming the
// provider as its consumer; the slices' events pass while they were a copy or carry the
// provider's finalizer). Each test asserts the secure behaviour: it passes when the attack
// is refused.

// a50Slice is a provider copy of tenant a's slice name asking for one CPU, the tenant's
// whole limit in TestAttack50RelabelPastLimitsAndCordon.
func a50Slice(t *testing.T, ns string, a *attacker, name string) *authv1beta1.ResourceSlice {
	t.Helper()
	rs := providerCopy(ns, name, a.id, sliceCSR(t, a.key, authn.SliceUserName(name, a.id), a.id))
	rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	return rs
}

// a50Issued waits for the provider to publish rs's certificate.
func a50Issued(t *testing.T, p *site, rs *authv1beta1.ResourceSlice) {
	t.Helper()
	eventually(t, 30*time.Second, "slice "+rs.Name+" is issued", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
		return err == nil && rs.Status.AuthParams.HasCertificate(), err
	})
}

// a50Relabel sets (or takes off) the replication label of slice key as c.
func a50Relabel(t *testing.T, c client.Client, key client.ObjectKey, asCopy bool) {
	t.Helper()
	ctx := context.Background()
	for {
		got := &authv1beta1.ResourceSlice{}
		require.NoError(t, c.Get(ctx, key, got))
		if asCopy {
			got.Labels[wire.ReplicationStatusLabel] = "true"
		} else {
			delete(got.Labels, wire.ReplicationStatusLabel)
		}
		err := c.Update(ctx, got)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			require.NoError(t, err)
		}
	}
}

// a50SliceCan: may the identity of slice rs (its published certificate, key) read its slice?
func a50SliceCan(t *testing.T, p *site, rs *authv1beta1.ResourceSlice, key *attacker) bool {
	t.Helper()
	c := userClient(t, p, rs.Status.AuthParams.SignedCRT, key.key)
	return selfCan(t, c, "get", authv1beta1.GroupVersion.Group, "resourceslices", rs.Namespace, rs.Name)
}

// a50Denied waits for the provider to deny rs (condition typ, reason, words). Unlike
// expectSliceDenied it does not ask for an empty status: a slice granted before keeps the
// certificate published then (the status is never cleared on a denial), which authorizes
// nothing once its binding is gone (checked by the callers).
func a50Denied(t *testing.T, p *site, rs *authv1beta1.ResourceSlice, typ, reason, words string) {
	t.Helper()
	waitSliceDenied(t, p, rs, typ, reason, words)
	assert.Empty(t, sliceCSRs(t, p, string(rs.UID)), "no certificate requested for a denied slice")
}

// TestAttack50FlipCopyChurn: the tenant's own identity flips a granted slice between copy
// and not a copy over and over. Each flip to "not a copy" now deletes its binding, Role
// and requests; each flip back re-decides it. Secure behaviour: no flip makes the manager
// request a certificate again (the published one is still the CSR's and not due for
// renewal), while not a copy the slice's identity may do nothing, and once it is a copy
// again and settled it holds its access again with the same certificate.
func TestAttack50FlipCopyChurn(t *testing.T) {
	t.Parallel()
	p, alice, ta, asAlice := grantedTenant(t, "a50-flip", "cl-alice50f")
	ctx := context.Background()
	rs := a50Slice(t, ta.Namespace, alice, "flip")
	require.NoError(t, asAlice.Create(ctx, rs))
	a50Issued(t, p, rs)
	uid, serial := string(rs.UID), rs.Status.Certificate.SerialNumber
	require.NotEmpty(t, controlledBindings(t, p, rs.Namespace, uid))

	w, err := p.client.Watch(ctx, &certificatesv1.CertificateSigningRequestList{}, client.MatchingLabels{wire.TenantUIDLabel: uid})
	require.NoError(t, err)
	defer w.Stop()
	created := map[string]bool{}
	drain := func() {
		for {
			select {
			case ev := <-w.ResultChan():
				if o, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && ev.Type == watch.Added {
					created[o.Name] = true
				}
			default:
				return
			}
		}
	}
	time.Sleep(time.Second)
	drain()
	before := len(created) // the watch lists the present ones first
	key := client.ObjectKeyFromObject(rs)
	for i := range 12 {
		a50Relabel(t, asAlice, key, false)
		if i%3 == 0 {
			// Let this one settle: not a copy, the slice's identity may do nothing. No binding
			// alone is not settled: under load the manager may still be working through the
			// previous flip back to a copy, and bind it once more before it reads this one
			// (seen in a CI run on a slow machine). Settled is no binding and no access, still
			// so a second later.
			settled := func() bool {
				return len(controlledBindings(t, p, rs.Namespace, uid)) == 0 && !a50SliceCan(t, p, rs, alice)
			}
			eventually(t, 20*time.Second, "the unlabelled slice loses its binding and its access", func(context.Context) (bool, error) {
				return settled(), nil
			})
			time.Sleep(time.Second)
			assert.True(t, settled(), "flip %d: not a copy, the slice's identity reads nothing", i)
		}
		a50Relabel(t, asAlice, key, true)
		drain()
	}
	eventually(t, 30*time.Second, "the copy again holds its binding", func(context.Context) (bool, error) {
		return len(controlledBindings(t, p, rs.Namespace, uid)) > 0, nil
	})
	time.Sleep(3 * time.Second)
	drain()
	require.NoError(t, p.client.Get(ctx, key, rs))
	assert.Equal(t, serial, rs.Status.Certificate.SerialNumber, "no certificate issued again")
	assert.LessOrEqual(t, len(created)-before, 0, "no certificate request made again over 12 flips: %v", created)
	assert.True(t, a50SliceCan(t, p, rs, alice), "settled as a copy, the slice's identity reads its slice")
}

// TestAttack50RelabelPastLimitsAndCordon: a slice that stops being a copy gives back its
// grant, which frees room under the tenant's limits. The tenant fills that room with
// another slice, then labels the first back. Secure behaviour: the first is denied (the
// limit holds), and holds no binding; Cordoned, a slice unlabelled and labelled again is a
// new slice (denied), not one that keeps its grant.
func TestAttack50RelabelPastLimitsAndCordon(t *testing.T) {
	// Serial: it settles for 2 s before it checks the access taken back: a manager slowed by other tests would look like a leak.
	p, alice, ta, asAlice := grantedTenant(t, "a50-limits", "cl-alice50l")
	ctx := context.Background()
	require.NoError(t, cluster.UpdateTenantRecord(ctx, p.client, p.client, wire.DefaultLiqoNamespace, alice.id, false, func(rec *cluster.TenantRecord) error {
		rec.SliceLimits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		return nil
	}))
	first := a50Slice(t, ta.Namespace, alice, "first")
	require.NoError(t, asAlice.Create(ctx, first))
	a50Issued(t, p, first)
	firstUID := string(first.UID)

	a50Relabel(t, asAlice, client.ObjectKeyFromObject(first), false)
	eventually(t, 20*time.Second, "the unlabelled slice gives back its grant", func(context.Context) (bool, error) {
		return len(controlledBindings(t, p, first.Namespace, firstUID)) == 0, nil
	})
	second := a50Slice(t, ta.Namespace, alice, "second")
	require.NoError(t, asAlice.Create(ctx, second))
	a50Issued(t, p, second)
	a50Relabel(t, asAlice, client.ObjectKeyFromObject(first), true)
	a50Denied(t, p, first, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, "cpu=1 asked, 1 of the 1 this tenant may hold already granted")
	time.Sleep(2 * time.Second)
	assert.Empty(t, controlledBindings(t, p, first.Namespace, firstUID), "labelled again past the limit, the slice holds nothing")
	assert.False(t, a50SliceCan(t, p, first, alice), "its old certificate authorizes nothing")
	assert.Empty(t, sliceCSRs(t, p, firstUID), "no request for the denied slice")

	// Cordoned: the second slice keeps its grant; unlabelled and labelled again, it is new.
	mustCLI(t, "cordon", "tenant", alice.id, "--kubeconfig", p.cp.Kubeconfig)
	time.Sleep(time.Second)
	require.NotEmpty(t, controlledBindings(t, p, second.Namespace, string(second.UID)), "a Cordoned tenant keeps its slices")
	a50Relabel(t, asAlice, client.ObjectKeyFromObject(second), false)
	eventually(t, 20*time.Second, "the unlabelled slice gives back its grant", func(context.Context) (bool, error) {
		return len(controlledBindings(t, p, second.Namespace, string(second.UID))) == 0, nil
	})
	a50Relabel(t, asAlice, client.ObjectKeyFromObject(second), true)
	a50Denied(t, p, second, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, "is Cordoned")
	time.Sleep(2 * time.Second)
	assert.Empty(t, controlledBindings(t, p, second.Namespace, string(second.UID)), "Cordoned, the relabelled slice gets nothing back")
	assert.False(t, a50SliceCan(t, p, second, alice))
}

// TestAttack50SameNameElsewhere: another tenant (its own identity) and a namespace creator
// make slices of the same name as alice's granted slice, in their own namespaces: not
// copies, carrying the provider's finalizer (and one of their own), copies naming alice
// as consumer, copies naming the provider; they delete them. Secure behaviour: alice's
// slice keeps its binding, its Role, its request and its access.
func TestAttack50SameNameElsewhere(t *testing.T) {
	t.Parallel()
	p, alice, ta, asAlice := grantedTenant(t, "a50-samename", "cl-alice50s")
	ctx := context.Background()
	const name = "shared"
	victim := a50Slice(t, ta.Namespace, alice, name)
	require.NoError(t, asAlice.Create(ctx, victim))
	a50Issued(t, p, victim)
	vUID := string(victim.UID)
	bindings, csrs := controlledBindings(t, p, victim.Namespace, vUID), sliceCSRs(t, p, vUID)
	require.NotEmpty(t, bindings)
	require.NotEmpty(t, csrs)

	bob := newAttacker(t, "cl-bob50s")
	tb := honestHandshake(t, p, bob)
	asBob := userClient(t, p, tb.Status.AuthParams.SignedCRT, bob.key)
	mallory := principal(t, p, "ns-creator50", "", rule("", "namespaces", "create", "get"),
		rule(authv1beta1.GroupVersion.Group, "resourceslices", "create", "get", "update", "patch", "delete", "list"),
		rule("rbac.authorization.k8s.io", "roles", "create", "get"), rule("rbac.authorization.k8s.io", "rolebindings", "create", "get"))
	require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a50-evil"}}))
	const hold = "attacker.example/hold"

	// Bob: his own copy of that name granted, then unlabelled and deleted under a hold.
	bobs := a50Slice(t, tb.Namespace, bob, name)
	require.NoError(t, asBob.Create(ctx, bobs))
	a50Issued(t, p, bobs)
	got := &authv1beta1.ResourceSlice{}
	require.NoError(t, asBob.Get(ctx, client.ObjectKeyFromObject(bobs), got))
	delete(got.Labels, wire.ReplicationStatusLabel)
	got.Finalizers = append(got.Finalizers, hold)
	require.NoError(t, asBob.Update(ctx, got))
	require.NoError(t, asBob.Delete(ctx, got))

	// Mallory: slices of that name in her namespace, in every shape.
	shapes := []func(rs *authv1beta1.ResourceSlice){
		func(rs *authv1beta1.ResourceSlice) { // not a copy, the provider's finalizer
			delete(rs.Labels, wire.ReplicationStatusLabel)
			rs.Finalizers = []string{wire.ProviderSliceFinalizer, hold}
		},
		func(rs *authv1beta1.ResourceSlice) { rs.Finalizers = []string{hold} },                 // a copy naming alice
		func(rs *authv1beta1.ResourceSlice) { rs.Spec.ConsumerClusterID = ptrClusterID(p.id) }, // naming the provider
	}
	for i, shape := range shapes {
		rs := a50Slice(t, "a50-evil", alice, name)
		shape(rs)
		require.NoError(t, mallory.Create(ctx, rs), "shape %d", i)
		time.Sleep(1500 * time.Millisecond)
		require.NoError(t, mallory.Delete(ctx, rs))
		time.Sleep(1500 * time.Millisecond)
		cur := &authv1beta1.ResourceSlice{}
		if mallory.Get(ctx, client.ObjectKeyFromObject(rs), cur) == nil {
			controllerutil.RemoveFinalizer(cur, hold)
			_ = mallory.Update(ctx, cur)
		}
	}
	time.Sleep(3 * time.Second)
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(victim), victim))
	assert.Nil(t, victim.DeletionTimestamp)
	assert.Contains(t, victim.Finalizers, wire.ProviderSliceFinalizer, "alice's slice keeps the provider's finalizer")
	assert.Equal(t, bindings, controlledBindings(t, p, victim.Namespace, vUID), "alice's slice keeps its binding")
	assert.Equal(t, csrs, sliceCSRs(t, p, vUID), "alice's slice keeps its request")
	assert.True(t, a50SliceCan(t, p, victim, alice), "alice's slice identity reads its slice")
	assert.Empty(t, controlledBindings(t, p, bobs.Namespace, string(bobs.UID)), "bob's held slice keeps nothing")
}

// TestAttack50BothRolesConsumerSlices: on a cluster that is consumer (and runs the
// provider's controllers too), the consumer's own slices are not copies. Someone who may
// write slices in the tenant namespace there (or a mistake) puts the provider's finalizer
// on one: finalize now runs for it. Secure behaviour: the consumer's slice keeps its
// Identity, its consumer finalizer and its status; the honest flow (created as liqoctl
// does, Cordoned keeps, Drained revokes) still works with the provider on the other side.
func TestAttack50BothRolesConsumerSlices(t *testing.T) {
	// Serial: it settles for 3 s before it checks the provider's finalizer taken off: a manager slowed by other tests would look like a leak.
	c, p := cliSites(t)
	ctx := context.Background()
	startControllers(t, p, authmanager.Provider)
	startControllers(t, c, authmanager.Both)
	mustCLI(t, pairArgs("authenticate", c, p)...)

	rs := localSlice(c, p, "both-a", "", "1")
	require.NoError(t, c.client.Create(ctx, rs))
	waitSliceDecided(t, c, rs)
	ok, words := sliceAccepted(rs)
	require.True(t, ok, words)
	kc := sliceKubeconfig(t, c, p, "both-a")
	pTN := wire.TenantNamespaceName(c.id)
	require.True(t, canI(t, kc, "get", authv1beta1.GroupVersion.Group, "resourceslices", pTN, "both-a"))

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "slice-writer50", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "patch"))
	got := &authv1beta1.ResourceSlice{}
	require.NoError(t, writer.Get(ctx, client.ObjectKeyFromObject(rs), got))
	got.Finalizers = append(got.Finalizers, wire.ProviderSliceFinalizer)
	require.NoError(t, writer.Update(ctx, got))
	time.Sleep(3 * time.Second)
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(rs), got))
	assert.Contains(t, got.Finalizers, wire.ConsumerSliceFinalizer, "the consumer's finalizer stays")
	assert.NotContains(t, got.Finalizers, wire.ProviderSliceFinalizer, "the provider's finalizer is taken off a slice that is no copy")
	ok, words = sliceAccepted(got)
	assert.True(t, ok, "the consumer's slice keeps its status: %s", words)
	id := &authv1beta1.Identity{}
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName("both-a")}, id), "the slice's Identity stays")
	assert.True(t, canI(t, kc, "get", authv1beta1.GroupVersion.Group, "resourceslices", pTN, "both-a"), "the provider still grants the slice")

	// Honest flow: Cordoned keeps, Drained revokes.
	mustCLI(t, "cordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	time.Sleep(2 * time.Second)
	assert.True(t, canI(t, kc, "get", authv1beta1.GroupVersion.Group, "resourceslices", pTN, "both-a"), "a Cordoned tenant keeps its slices")
	_, errOut := mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	t.Logf("drain: %s", errOut)
	assert.False(t, canI(t, kc, "get", authv1beta1.GroupVersion.Group, "resourceslices", pTN, "both-a"), "Drained revokes")
}
