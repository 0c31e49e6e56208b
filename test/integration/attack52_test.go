package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Attacks on 5e48f7a (liqoctl applies the Tenant with the manager's finalizer already on
// where a liqo-auth-manager runs: the manager's resourceVersion-guarded finalizer patch no
// longer fences the first reconcile of liqoctl's Tenants). Each test asserts the secure
// behaviour: it passes when the attack is refused. The provider runs the provider
// controllers in-process (the same reconciler the manager runs); the Tenants carry the
// finalizer from their creation, as liqoctl's do where a manager runs.

// a52WaitConsumed waits (at most 10 s) until the tenant record of id names uid: the manager
// consumed the nonce, right before carryOutAccepted. w is a watch opened before the Tenant
// was created.
func a52WaitConsumed(w watch.Interface, uid string) {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
				for _, v := range cm.Data {
					if strings.Contains(v, uid) {
						return
					}
				}
			}
		case <-deadline:
			return
		}
	}
}

func a52WatchRecord(t *testing.T, p *site, id string) watch.Interface {
	t.Helper()
	w, err := p.client.Watch(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(wire.DefaultLiqoNamespace),
		client.MatchingFields{"metadata.name": wire.TenantRecordName(id)})
	require.NoError(t, err)
	return w
}

// a52ReadyTenant makes consumer id's Tenant on p as liqoctl applies it where a manager
// runs (the manager's finalizer on), through its peering user, and waits until it is Ready.
func a52ReadyTenant(t *testing.T, p *site, id string) (*attacker, client.WithWatch, *authv1beta1.Tenant) {
	t.Helper()
	a := newAttacker(t, id)
	tn, nonce := freshNonce(t, p, id)
	peer := attack48PeeringUser(t, p, id, tn)
	tenant := a.honestTenant(t, tn, nonce)
	tenant.Finalizers = []string{wire.TenantFinalizer}
	require.NoError(t, cluster.Apply(context.Background(), peer, tenant, wire.FieldOwner))
	got := &authv1beta1.Tenant{}
	eventually(t, 30*time.Second, "the Tenant is Ready", func(ctx context.Context) (bool, error) {
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(tenant), got); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady), nil
	})
	return a, peer, got
}

// a52Keeps says what the Tenant held in deletion (got, of UID uid) keeps, "" when nothing:
// bindings it controls, requests made for it, actions of the control plane its cluster ID
// may still do.
func a52Keeps(t *testing.T, p *site, got *authv1beta1.Tenant, uid string) string {
	t.Helper()
	tn, id := got.Namespace, got.Name
	var what []string
	if left := controlledBindings(t, p, tn, uid); len(left) > 0 {
		what = append(what, fmt.Sprintf("bindings %v", left))
	}
	if csrs := tenantCSRs(t, p, tn, id, uid); len(csrs) > 0 {
		what = append(what, fmt.Sprintf("CSRs %v", csrs))
	}
	allowed, err := revocation.AllowedActions(context.Background(), p.client, id, []string{wire.UserGroup}, tn, access.ControlPlaneRules())
	require.NoError(t, err)
	if len(allowed) > 0 {
		what = append(what, fmt.Sprintf("user %q may %v", id, allowed))
	}
	return strings.Join(what, "; ")
}

// a52BindingsNaming lists, as text, every binding naming user id or one of groups.
func a52BindingsNaming(t *testing.T, p *site, id string, groups []string) []string {
	t.Helper()
	bs, err := revocation.BindingsNaming(context.Background(), p.client, id, groups)
	require.NoError(t, err)
	var out []string
	for _, b := range bs {
		out = append(out, fmt.Sprintf("%s %s/%s -> %s %s (controller %q)", b.Kind, b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name, b.ControllerUID))
	}
	return out
}

// TestAttack52DeletedAsAcceptedWithFinalizerOn: attack47 again, now that the Tenant
// carries the manager's finalizer from its creation (no patch guards the first reconcile
// any more). A Tenant writer of the tenant namespace creates the Tenant with the manager's
// finalizer and a foreign one, and deletes it right as the nonce is consumed (or right
// after its creation, every fourth try). Secure behaviour: once the manager settled, the
// Tenant, held in deletion by the foreign finalizer, has no binding controlled by it, no
// CSR made for it, no certificate published in its status, and the cluster ID may do none
// of the control plane's actions. (The log says what was made for the Tenant in deletion
// in the second after its deletion: bindings and signed requests are, now that no refused
// patch stops the reconcile; the finalize that follows removes them.)
func TestAttack52DeletedAsAcceptedWithFinalizerOn(t *testing.T) {
	// Serial: its tries settle for 2 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a52-delete")
	ctx := context.Background()
	const hold = "attacker.example/hold"
	var leftovers []string
	for i := range 10 {
		id := fmt.Sprintf("cl-a52d%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		writer := principal(t, p, "tenant-writer", tn, rule(authv1beta1.GroupVersion.Group, "tenants", "create", "get", "delete"))
		tenant := a.honestTenant(t, tn, nonce)
		tenant.Finalizers = []string{wire.TenantFinalizer, hold}
		w := a52WatchRecord(t, p, id)
		require.NoError(t, writer.Create(ctx, tenant))
		uid := string(tenant.UID)
		if i%4 != 3 {
			a52WaitConsumed(w, uid)
			if i%3 != 0 {
				time.Sleep(time.Duration(i%3) * time.Millisecond)
			}
		}
		w.Stop()
		require.NoError(t, writer.Delete(ctx, tenant))
		seen := map[string]bool{}
		for range 25 {
			for _, b := range controlledBindings(t, p, tn, uid) {
				seen["binding "+b] = true
			}
			for _, c := range tenantCSRs(t, p, tn, id, uid) {
				seen["CSR "+c] = true
			}
			time.Sleep(40 * time.Millisecond)
		}
		t.Logf("try %d: made for the Tenant in deletion in the second after its deletion: %v", i, seen)
		time.Sleep(2 * time.Second)

		got := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tenant), got), "the foreign finalizer holds the Tenant")
		require.NotNil(t, got.DeletionTimestamp)
		what := a52Keeps(t, p, got, uid)
		if got.Status.AuthParams.HasCertificate() {
			what += "; a certificate published in its status (it was deleted before its acceptance was saved)"
		}
		if what != "" {
			leftovers = append(leftovers, fmt.Sprintf("try %d: Tenant %s/%s in deletion (finalizers %v) keeps %s", i, tn, id, got.Finalizers, what))
			if len(leftovers) >= 2 {
				break
			}
		}
	}
	assert.Empty(t, leftovers, "a Tenant deleted as it is accepted keeps nothing, though no finalizer patch guarded the reconcile")
}

// TestAttack52StripDeleteRecreateMidReconcile: attack48 again with the finalizer on from
// creation. The peering user of C creates its Tenant with the manager's finalizer, and the
// moment the nonce is consumed (right before carryOutAccepted, which no longer patches
// anything: the reconcile goes on with the cached copy) strips the finalizer, deletes the
// Tenant (it goes at once) and creates it again under its name. Secure behaviour: once the
// manager settled, no CSR made for the Tenant that is gone is left, and no binding
// controlled by it outlives it (the garbage collector's, up to 45 s on a fresh control
// plane); the new Tenant's access is its own.
func TestAttack52StripDeleteRecreateMidReconcile(t *testing.T) {
	// Serial: its tries settle for 4 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a52-recreate")
	ctx := context.Background()
	var leftovers []string
	type gone struct{ tn, id, uid string }
	var old []gone
	for i := range 6 {
		id := fmt.Sprintf("cl-a52r%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		peer := attack48PeeringUser(t, p, id, tn)
		tenant := a.honestTenant(t, tn, nonce)
		tenant.Finalizers = []string{wire.TenantFinalizer}
		w := a52WatchRecord(t, p, id)
		require.NoError(t, peer.Create(ctx, tenant))
		uid := string(tenant.UID)
		a52WaitConsumed(w, uid)
		w.Stop()
		ref := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}
		if err := peer.Patch(ctx, ref, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			continue
		}
		require.NoError(t, client.IgnoreNotFound(peer.Delete(ctx, ref)))
		again := a.honestTenant(t, tn, nonce)
		again.Finalizers = []string{wire.TenantFinalizer}
		if err := peer.Create(ctx, again); err != nil {
			t.Logf("try %d: the re-creation lost the race: %v", i, err)
			continue
		}
		old = append(old, gone{tn, id, uid})
		time.Sleep(300 * time.Millisecond)
		t.Logf("try %d: 300 ms after the re-creation, made for the old Tenant (uid %s): bindings %v, CSRs %v", i, uid,
			controlledBindings(t, p, tn, uid), tenantCSRs(t, p, tn, id, uid))
		time.Sleep(4 * time.Second)
		if csrs := tenantCSRs(t, p, tn, id, uid); len(csrs) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("try %d: CSRs %v made for the deleted Tenant %s/%s (uid %s; now uid %s)", i, csrs, tn, id, uid, again.UID))
		}
		if len(leftovers) > 0 {
			break
		}
	}
	// The bindings made for a Tenant that is gone are the garbage collector's.
	for _, g := range old {
		eventually(t, 45*time.Second, "no binding controlled by the deleted Tenant "+g.tn+"/"+g.id+" is left", func(context.Context) (bool, error) {
			return len(controlledBindings(t, p, g.tn, g.uid)) == 0, nil
		})
	}
	assert.Empty(t, leftovers, "nothing made for a Tenant that is gone is left")
}

// warmGC waits until the garbage collector of p handles the kind of probe, which it
// creates in a namespace of its own (on a fresh control plane the collector learns of the
// CRDs up to 30 s late): probe, deleted in the foreground, goes once a ConfigMap it owns is
// collected. Setup, as the administrator; the probe is outside every tenant namespace, so
// the controllers decide nothing for it.
func warmGC(t *testing.T, p *site, probe client.Object, kind string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probe.GetNamespace()}}))
	require.NoError(t, p.client.Create(ctx, probe))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: probe.GetNamespace(), OwnerReferences: []metav1.OwnerReference{{
		APIVersion: authv1beta1.GroupVersion.String(), Kind: kind, Name: probe.GetName(), UID: probe.GetUID()}}}}
	require.NoError(t, p.client.Create(ctx, cm))
	require.NoError(t, p.client.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	eventually(t, 90*time.Second, "the garbage collector handles "+kind+"s", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(probe), probe.DeepCopyObject().(client.Object))) &&
			apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})), nil
	})
}

// a52WarmGC waits until the garbage collector of p handles Tenants (warmGC).
func a52WarmGC(t *testing.T, p *site) {
	t.Helper()
	someNonce, err := authn.NewNonce()
	require.NoError(t, err)
	warmGC(t, p, newAttacker(t, "cl-a52-probe").honestTenant(t, "a52-gc-probe", someNonce), "Tenant")
}

// TestAttack52DeletedWithOrphanPropagation: the Tenant's own certificate identity (get,
// list, watch and delete on its own Tenant, TenantReaderRules), or its peering user,
// deletes its Ready Tenant with propagationPolicy Orphan. The API server adds the
// "orphan" finalizer, and the garbage collector strips the Tenant's owner reference from
// its Role and RoleBindings, racing the manager's finalize, which deletes only the
// bindings the Tenant still controls. Secure behaviour: once the Tenant is gone, no binding
// names the cluster ID (or its key group), and it may do none of the control plane's
// actions. (Not specific to 5e48f7a: an accepted Tenant carried the finalizer before it
// too, and this test fails the same way on 1e9ff69 with the Tenant created without it.)
func TestAttack52DeletedWithOrphanPropagation(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a52-orphan")
	ctx := context.Background()
	a52WarmGC(t, p)
	var leftovers []string
	for i := range 4 {
		id := fmt.Sprintf("cl-a52o%d", i)
		a, peer, got := a52ReadyTenant(t, p, id)
		tn, key := got.Namespace, client.ObjectKeyFromObject(got)
		uid := string(got.UID)
		cert, err := authn.ParseCertificate(got.Status.AuthParams.SignedCRT)
		require.NoError(t, err)
		groups := cert.Subject.Organization
		require.NotEmpty(t, controlledBindings(t, p, tn, uid))

		who := "the tenant's certificate identity"
		deleter := client.Client(peer)
		if i%2 == 0 {
			keyPEM, keyErr := authn.MarshalPrivateKey(a.key)
			require.NoError(t, keyErr)
			deleter = newClient(t, &rest.Config{Host: p.cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.cp.CA.CertPEM,
				CertData: got.Status.AuthParams.SignedCRT, KeyData: keyPEM}})
			require.NoError(t, deleter.Get(ctx, key, &authv1beta1.Tenant{}), "the identity reads its Tenant")
		} else {
			who = "its peering user"
		}
		require.NoError(t, deleter.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}},
			client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		eventually(t, 30*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, key, &authv1beta1.Tenant{})), nil
		})
		time.Sleep(3 * time.Second)
		left := a52BindingsNaming(t, p, id, groups)
		allowed, err := revocation.AllowedActions(ctx, p.client, id, groups, tn, access.ControlPlaneRules())
		require.NoError(t, err)
		if len(left) > 0 || len(allowed) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("try %d (%s deleted with propagationPolicy=Orphan): Tenant %s/%s (uid %s) is gone; bindings left %v; user %q (groups %v) may still %v",
				i, who, tn, id, uid, left, id, groups, allowed))
		}
	}
	assert.Empty(t, leftovers, "no binding outlives a Tenant deleted with propagationPolicy=Orphan")
}

// TestAttack52PeeringUserAppliesAsLiqoctlWithoutFinalizer: with the finalizer applied by
// liqoctl, the manager owns no part of it (it patched none in). The peering user of C
// server-side applies its Ready Tenant again under liqoctl's field manager, without the
// manager's finalizer and with one of its own: server-side apply removes the manager's
// finalizer (liqoctl was its only owner), and the Tenant is deleted at once. Secure
// behaviour: the Tenant, held in deletion by the foreign finalizer, keeps no binding and
// no CSR, and the cluster ID may do none of the control plane's actions.
func TestAttack52PeeringUserAppliesAsLiqoctlWithoutFinalizer(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a52-ssa")
	ctx := context.Background()
	const hold = "attacker.example/hold"
	var leftovers []string
	for i := range 4 {
		id := fmt.Sprintf("cl-a52s%d", i)
		_, peer, got := a52ReadyTenant(t, p, id)
		tn, key := got.Namespace, client.ObjectKeyFromObject(got)
		uid := string(got.UID)
		assert.Equal(t, []string{wire.FieldOwner + " Apply"}, finalizerOwners(t, got), "only liqoctl's apply owns the finalizer")

		again := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn, Labels: map[string]string{wire.RemoteClusterIDLabel: id},
			Finalizers: []string{hold}}, Spec: got.Spec}
		require.NoError(t, cluster.Apply(ctx, peer, again, wire.FieldOwner))
		after := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, key, after))
		t.Logf("try %d: after the peering user's apply as %q, finalizers %v", i, wire.FieldOwner, after.Finalizers)
		if i%2 == 1 {
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
		}
		require.NoError(t, peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}))
		time.Sleep(3 * time.Second)
		require.NoError(t, p.client.Get(ctx, key, after), "the foreign finalizer holds the Tenant")
		if what := a52Keeps(t, p, after, uid); what != "" {
			leftovers = append(leftovers, fmt.Sprintf("try %d: Tenant %s/%s in deletion (finalizers %v) keeps %s", i, tn, id, after.Finalizers, what))
		}
	}
	assert.Empty(t, leftovers, "a Tenant whose finalizer liqoctl's field manager dropped keeps nothing once deleted")
}

// TestAttack52ForgedManagerLease: a stolen liqo-auth-manager ServiceAccount token writes the
// manager's Lease on a provider where no manager runs (held by "forged", renewed now).
// liqoctl authenticate then believes a manager runs: it starts no provider controllers,
// applies the Tenant with the manager's finalizer, and gives up. The Tenant keeps that
// finalizer while the Lease looks held: no new power, for the same token may add the
// finalizer to any Tenant itself (shown here), and refuse every handshake by holding the
// Lease. Once the token stops renewing the Lease (revoked), liqoctl unauthenticate finds no
// manager, runs the provider's controllers in-process, and they let the Tenant go: nothing
// is stuck for longer than the token is.
func TestAttack52ForgedManagerLease(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	cfg, err := provider.cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	require.NoError(t, err)
	stolen := newClient(t, cfg)
	now := metav1.NewMicroTime(time.Now())
	const held = 20 // seconds the forged Lease says it is held, never renewed
	require.NoError(t, stolen.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.ManagerName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("forged"), LeaseDurationSeconds: ptr.To[int32](held), AcquireTime: &now, RenewTime: &now}}),
		"the manager's token writes its Lease")

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, errOut, err := runCLIContext(cctx, pairArgs("authenticate", consumer, provider, "--timeout", "8s")...)
	require.Error(t, err, "no controller decides the Tenant")
	assert.Contains(t, errOut+err.Error(), "liqo-auth-manager", "the failure names the manager it waited for")
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}
	got := &authv1beta1.Tenant{}
	require.NoError(t, provider.client.Get(ctx, key, got))
	assert.Equal(t, []string{wire.TenantFinalizer}, got.Finalizers, "liqoctl applied the Tenant for the manager the Lease announced")

	// The token could have put it there itself, on this Tenant or any other.
	require.NoError(t, provider.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a52-other"}}))
	otherNonce, err := authn.NewNonce()
	require.NoError(t, err)
	other := newAttacker(t, "cl-other").honestTenant(t, "a52-other", otherNonce)
	require.NoError(t, provider.client.Create(ctx, other))
	patch := client.MergeFrom(other.DeepCopy())
	other.Finalizers = []string{wire.TenantFinalizer}
	require.NoError(t, stolen.Patch(ctx, other, patch), "the manager's token may add the finalizer to any Tenant")

	// The token is revoked: the Lease it wrote goes stale, and unauthenticate, finding no
	// manager, runs the provider's controllers in-process, which let the Tenant go.
	time.Sleep(time.Until(now.Add(held*time.Second + time.Second)))
	uctx, ucancel := context.WithTimeout(ctx, 90*time.Second)
	defer ucancel()
	_, errOut, err = runCLIContext(uctx, pairArgs("unauthenticate", consumer, provider)...)
	require.NoError(t, err, "unauthenticate once the forged Lease is stale:\n%s", errOut)
	assert.Contains(t, errOut, "in-process", "no manager runs: the provider's controllers run in the command")
	assert.True(t, apierrors.IsNotFound(provider.client.Get(ctx, key, got)), "the Tenant is let go")
}
