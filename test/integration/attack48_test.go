package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Attacks on carryOutAccepted after 9a47e7f (the finalizer's patch first, then the access
// and the certificate at once; the submission check on a copy taken before the patch).
// Each test asserts the secure behaviour: it passes when the attack is refused.

// attack48PeeringUser is the peering user of id: exactly its rules on the Tenant (docs/security.md).
func attack48PeeringUser(t *testing.T, p *site, id, tn string) client.WithWatch {
	t.Helper()
	return principal(t, p, "liqo-peer-user-"+id+"-a48", tn, rule(authv1beta1.GroupVersion.Group, "tenants", "create", "get", "list", "watch", "patch", "update", "delete"))
}

// createUntilFinalized creates tenant as peer and returns the moment peer's watch sees the
// manager's finalizer on it (the manager's first reconcile, right before the access and
// the certificate request).
func createUntilFinalized(t *testing.T, peer client.WithWatch, tenant *authv1beta1.Tenant) {
	t.Helper()
	ctx := context.Background()
	w, err := peer.Watch(ctx, &authv1beta1.TenantList{}, client.InNamespace(tenant.Namespace))
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, peer.Create(ctx, tenant))
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if o, ok := ev.Object.(*authv1beta1.Tenant); ok && ev.Type != watch.Deleted && slices.Contains(o.Finalizers, wire.TenantFinalizer) {
				return
			}
		case <-deadline:
			t.Fatalf("the manager never gave Tenant %s/%s its finalizer", tenant.Namespace, tenant.Name)
		}
	}
}

// tenantCSRs are the CertificateSigningRequests the manager made for the Tenant tn/id, for
// the one of UID uid only unless uid is "".
func tenantCSRs(t *testing.T, p *site, tn, id, uid string) []string {
	t.Helper()
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(context.Background(), &csrs))
	var out []string
	for _, c := range csrs.Items {
		if c.Annotations[wire.TenantAnnotation] == tn+"/"+id && (uid == "" || c.Labels[wire.TenantUIDLabel] == uid) {
			out = append(out, fmt.Sprintf("%s (uid label %s, certificate issued: %t)", c.Name, c.Labels[wire.TenantUIDLabel], len(c.Status.Certificate) > 0))
		}
	}
	return out
}

// TestAttack48PeeringUserSwapsTheFinalizer: the peering user of C (spec and metadata of the
// Tenant C) takes the manager's finalizer off its Ready Tenant, keeping one of its own, and
// deletes it: finalize does nothing for a Tenant without the manager's finalizer, and the
// garbage collector waits for the foreign finalizer. Two orders, each raced against the
// manager: swap then delete (the manager may put its finalizer back in between: about one
// try in two wins), and, every fourth try, delete then strip (finalize may run first). Secure behaviour: a Tenant in deletion keeps no
// binding (what TestAttack47TenantDeletedWhileAccessIsGranted asks of the refused patch).
func TestAttack48PeeringUserSwapsTheFinalizer(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a48-swap")
	ctx := context.Background()
	const hold = "attacker.example/hold"
	var leftovers []string
	for i := range 8 {
		id := fmt.Sprintf("cl-swap%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		peer := attack48PeeringUser(t, p, id, tn)
		tenant := a.honestTenant(t, tn, nonce)
		require.NoError(t, peer.Create(ctx, tenant))
		key := client.ObjectKeyFromObject(tenant)
		eventually(t, 30*time.Second, "the Tenant is Ready", func(ctx context.Context) (bool, error) {
			got := &authv1beta1.Tenant{}
			if err := p.client.Get(ctx, key, got); err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady), nil
		})
		require.NotEmpty(t, controlledBindings(t, p, tn, string(tenant.UID)))

		// The attack, as the peering user.
		ref := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}
		onlyHold := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, hold)))
		if i%4 != 3 {
			require.NoError(t, peer.Patch(ctx, ref, onlyHold))
			require.NoError(t, peer.Delete(ctx, ref))
		} else {
			both := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q,%q]}}`, wire.TenantFinalizer, hold)))
			require.NoError(t, peer.Patch(ctx, ref, both))
			require.NoError(t, peer.Delete(ctx, ref))
			_ = peer.Patch(ctx, ref, onlyHold) // finalize may have removed it already
		}
		time.Sleep(3 * time.Second)

		got := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, key, got), "the foreign finalizer holds the Tenant")
		require.NotNil(t, got.DeletionTimestamp)
		if left := controlledBindings(t, p, tn, string(tenant.UID)); len(left) > 0 {
			allowed, err := revocation.AllowedActions(ctx, p.client, id, []string{wire.UserGroup}, tn, access.ControlPlaneRules())
			require.NoError(t, err)
			leftovers = append(leftovers, fmt.Sprintf("try %d: Tenant %s/%s in deletion (finalizers %v) keeps bindings %v; user %q may still %v", i, tn, id, got.Finalizers, left, id, allowed))
			break // one shows it
		}
	}
	assert.Empty(t, leftovers, "a Tenant in deletion keeps no binding, whoever took the manager's finalizer off")
}

// TestAttack48PeeringUserStripsTheFinalizerMidReconcile: the peering user of C removes the
// manager's finalizer the moment the manager's patch added it (the first reconcile, right
// before the access and the certificate request), and deletes the Tenant, which then goes
// at once: no finalize runs for it. Secure behaviour: once the manager settled, no
// CertificateSigningRequest made for it (with the certificate it was issued) outlives it.
func TestAttack48PeeringUserStripsTheFinalizerMidReconcile(t *testing.T) {
	t.Parallel()
	p := attack47Provider(t, "a48-strip")
	ctx := context.Background()
	var leftovers []string
	for i := range 6 {
		id := fmt.Sprintf("cl-strip%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		peer := attack48PeeringUser(t, p, id, tn)
		tenant := a.honestTenant(t, tn, nonce)
		createUntilFinalized(t, peer, tenant)
		uid := string(tenant.UID)
		if i%2 == 1 {
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, peer.Patch(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
		require.NoError(t, peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}))
		// Settle: the manager's reconciles. (The bindings, controlled by the Tenant, are the
		// garbage collector's once it is gone; on a fresh test control plane the collector
		// learns of the Tenant CRD up to 30 s late, so they are not asserted here.)
		var csrs []string
		for range 6 {
			time.Sleep(time.Second)
			if csrs = tenantCSRs(t, p, tn, id, ""); len(csrs) == 0 {
				break
			}
		}
		if len(csrs) > 0 {
			gone := &authv1beta1.Tenant{}
			leftovers = append(leftovers, fmt.Sprintf("Tenant %s/%s (uid %s, present now: %v): CSRs %v remain", tn, id, uid,
				p.client.Get(ctx, client.ObjectKeyFromObject(tenant), gone) == nil, csrs))
			break
		}
	}
	assert.Empty(t, leftovers, "nothing the manager made for a Tenant outlives it, even when its finalizer was stripped mid-reconcile")
}

// TestAttack48SpecSwappedAfterTheCheckCopy: the submission check reads a copy of the Tenant
// taken before the finalizer's patch. The peering user of C swaps spec.publicKey and
// spec.csr for another key's the moment the patch lands (the check may already have
// verified the sealed spec). Secure behaviour: no certificate, in a request or in the
// status, is ever issued for the swapped-in key.
func TestAttack48SpecSwappedAfterTheCheckCopy(t *testing.T) {
	t.Parallel()
	p := attack47Provider(t, "a48-spec")
	ctx := context.Background()
	var issuedForOther []string
	for i := range 3 {
		id := fmt.Sprintf("cl-spec%d", i)
		a, other := newAttacker(t, id), newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		peer := attack48PeeringUser(t, p, id, tn)
		tenant := a.honestTenant(t, tn, nonce)
		createUntilFinalized(t, peer, tenant)
		swap := &authv1beta1.Tenant{}
		require.NoError(t, peer.Get(ctx, client.ObjectKeyFromObject(tenant), swap))
		swap.Spec.PublicKey, swap.Spec.CSR = other.pubPEM(t), other.csr(t)
		require.NoError(t, peer.Update(ctx, swap))
		time.Sleep(3 * time.Second)

		otherPub := other.key.Public()
		var csrs certificatesv1.CertificateSigningRequestList
		require.NoError(t, p.client.List(ctx, &csrs))
		for _, c := range csrs.Items {
			if c.Annotations[wire.TenantAnnotation] != tn+"/"+id || len(c.Status.Certificate) == 0 {
				continue
			}
			cert, err := authn.ParseCertificate(c.Status.Certificate)
			require.NoError(t, err)
			if authn.PublicKeysEqual(cert.PublicKey, otherPub) {
				issuedForOther = append(issuedForOther, fmt.Sprintf("CSR %s of %s/%s", c.Name, tn, id))
			}
		}
		got := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tenant), got))
		if got.Status.AuthParams != nil && len(got.Status.AuthParams.SignedCRT) > 0 {
			cert, err := authn.ParseCertificate(got.Status.AuthParams.SignedCRT)
			require.NoError(t, err)
			if authn.PublicKeysEqual(cert.PublicKey, otherPub) {
				issuedForOther = append(issuedForOther, fmt.Sprintf("the status of %s/%s", tn, id))
			}
		}
	}
	assert.Empty(t, issuedForOther, "no certificate is issued for a key swapped in after the check's copy")
}

// TestAttack48TenantRecreatedUnderThePatch: the finalizer's merge patch carries no
// resourceVersion nor UID. The peering user of C deletes its Tenant (no finalizer yet: it
// goes at once) and creates it again, same name, the moment the manager consumed the nonce
// (right before carryOutAccepted): the patch then lands on the new Tenant, and the request
// and the bindings are made for the old one. Secure behaviour: once the manager settled, no
// CertificateSigningRequest made for a Tenant that is gone is left.
func TestAttack48TenantRecreatedUnderThePatch(t *testing.T) {
	// Serial: its tries settle for 4 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a48-recreate")
	ctx := context.Background()
	var leftovers []string
	for i := range 6 {
		id := fmt.Sprintf("cl-re%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		peer := attack48PeeringUser(t, p, id, tn)
		tenant := a.honestTenant(t, tn, nonce)
		w, err := p.client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(wire.DefaultLiqoNamespace),
			client.MatchingFields{"metadata.name": wire.TenantRecordName(id)})
		require.NoError(t, err)
		require.NoError(t, peer.Create(ctx, tenant))
		uid := string(tenant.UID)
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
					for _, v := range cm.Data {
						if strings.Contains(v, uid) {
							break wait
						}
					}
				}
			case <-deadline:
				break wait
			}
		}
		w.Stop()
		require.NoError(t, peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: tn}}))
		again := a.honestTenant(t, tn, nonce)
		if err := peer.Create(ctx, again); err != nil {
			continue // the manager's finalizer came first: the old one is still being deleted
		}
		time.Sleep(4 * time.Second)
		var csrs certificatesv1.CertificateSigningRequestList
		require.NoError(t, p.client.List(ctx, &csrs))
		for _, c := range csrs.Items {
			if c.Annotations[wire.TenantAnnotation] == tn+"/"+id && c.Labels[wire.TenantUIDLabel] != string(again.UID) {
				leftovers = append(leftovers, fmt.Sprintf("try %d: CSR %s for the deleted Tenant %s/%s (uid %s; now uid %s), certificate issued: %t",
					i, c.Name, tn, id, c.Labels[wire.TenantUIDLabel], again.UID, len(c.Status.Certificate) > 0))
			}
		}
		if len(leftovers) > 0 {
			break
		}
	}
	assert.Empty(t, leftovers, "no request made for a Tenant that is gone is left")
}
