package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// Attacks on 44f4979 (finalize for every owner being deleted, whoever took the finalizer
// off; leftovers of an owner of the same name deleted on every reconcile; the finalizer's
// patch with the resourceVersion). Each test asserts the secure behaviour: it passes when
// the attack is refused.

// grantedTenant is a provider of the test's own (name) and the consumer id authenticated
// into it: the attacker, its Tenant, and a client acting as the tenant's own identity (its
// real certificate).
func grantedTenant(t *testing.T, name, id string) (*site, *attacker, *authv1beta1.Tenant, client.WithWatch) {
	t.Helper()
	p := attack47Provider(t, name)
	a := newAttacker(t, id)
	ta := honestHandshake(t, p, a)
	return p, a, ta, userClient(t, p, ta.Status.AuthParams.SignedCRT, a.key)
}

// sliceCSRs are the CertificateSigningRequests the manager made for the slice of UID uid.
func sliceCSRs(t *testing.T, p *site, uid string) []string {
	t.Helper()
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(context.Background(), &csrs, client.MatchingLabels{wire.TenantUIDLabel: uid}))
	var out []string
	for _, c := range csrs.Items {
		out = append(out, fmt.Sprintf("%s (certificate issued: %t)", c.Name, len(c.Status.Certificate) > 0))
	}
	return out
}

// TestAttack49TenantHidesItsHeldSliceFromFinalize: finalize now runs for every slice being
// deleted, the manager's finalizer on it or not, so that a tenant that swaps the
// provider's finalizer for one of its own keeps nothing. But the reconcile returns before
// finalize for a slice that is not a provider copy of another cluster's slice
// (access.SliceConsumer: the label liqo.io/replicated, spec.consumerClusterID), and the
// tenant's own identity writes its slices' labels and spec (ControlPlaneRules: crud on
// resourceslices in its tenant namespace). It takes the replication label off (or names
// the provider as the consumer) in the same write as the finalizer swap, then deletes the
// slice. Secure behaviour: the slice in deletion keeps no binding and no request.
func TestAttack49TenantHidesItsHeldSliceFromFinalize(t *testing.T) {
	// Serial: its tries settle for 4 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p, alice, ta, asAlice := grantedTenant(t, "a49-hide", "cl-alice49")
	ctx := context.Background()
	const hold = "attacker.example/hold"

	variants := []struct {
		name string
		hide func(rs *authv1beta1.ResourceSlice)
	}{
		{"unlabelled, the provider's finalizer swapped", func(rs *authv1beta1.ResourceSlice) {
			delete(rs.Labels, wire.ReplicationStatusLabel)
			rs.Finalizers = []string{hold}
		}},
		{"unlabelled, the provider's finalizer kept", func(rs *authv1beta1.ResourceSlice) {
			delete(rs.Labels, wire.ReplicationStatusLabel)
		}},
		{"the provider named consumer, finalizer swapped", func(rs *authv1beta1.ResourceSlice) {
			rs.Spec.ConsumerClusterID = ptrClusterID(p.id)
			rs.Finalizers = []string{hold}
		}},
	}
	var leftovers []string
	for i, v := range variants {
		name := fmt.Sprintf("hide%d", i)
		rs := providerCopy(ta.Namespace, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
		require.NoError(t, asAlice.Create(ctx, rs))
		eventually(t, 30*time.Second, "slice "+name+" is issued", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
			return err == nil && rs.Status.AuthParams.HasCertificate(), err
		})
		uid := string(rs.UID)
		require.NotEmpty(t, controlledBindings(t, p, rs.Namespace, uid), "the slice controls its binding")
		require.NotEmpty(t, sliceCSRs(t, p, uid), "the slice's request")

		// The attack, as the tenant's own identity.
		got := &authv1beta1.ResourceSlice{}
		require.NoError(t, asAlice.Get(ctx, client.ObjectKeyFromObject(rs), got))
		v.hide(got)
		require.NoError(t, asAlice.Update(ctx, got))
		require.NoError(t, asAlice.Delete(ctx, got))
		time.Sleep(4 * time.Second)

		// The tenant's finalizer holds the slice; with the provider's alone, the slice, no
		// longer a copy, was let go.
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), got); err == nil {
			require.NotNil(t, got.DeletionTimestamp)
		} else {
			require.True(t, apierrors.IsNotFound(err), "reading slice %s: %v", name, err)
		}
		left := controlledBindings(t, p, rs.Namespace, uid)
		csrs := sliceCSRs(t, p, uid)
		if len(left) > 0 || len(csrs) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("%s: slice %s/%s in deletion (finalizers %v, labels %v) keeps bindings %v and requests %v",
				v.name, rs.Namespace, name, got.Finalizers, got.Labels, left, csrs))
		}
	}
	assert.Empty(t, leftovers, "a slice in deletion keeps no binding and no request, whatever its tenant wrote on it")
}

// TestAttack49TenantStripsTheSliceFinalizerMidReconcile: the tenant's own identity takes
// the provider's finalizer off its slice the moment ensureFinalizer put it there (right
// before the access and the certificate request), and deletes the slice, which goes at
// once; every other try it makes the slice again under the same name (no finalizer this
// time, its CSR a fresh one). Secure behaviour: once the manager settled, no request made
// for a slice that is gone is left (the bindings, controlled by the gone slice, are the
// garbage collector's).
func TestAttack49TenantStripsTheSliceFinalizerMidReconcile(t *testing.T) {
	t.Parallel()
	p, alice, ta, asAlice := grantedTenant(t, "a49-strip", "cl-alice49s")
	ctx := context.Background()
	var leftovers []string
	for i := range 6 {
		name := fmt.Sprintf("strip%d", i)
		rs := providerCopy(ta.Namespace, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
		w, err := asAlice.Watch(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(ta.Namespace))
		require.NoError(t, err)
		require.NoError(t, asAlice.Create(ctx, rs))
		uid := string(rs.UID)
		deadline := time.After(15 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				if o, ok := ev.Object.(*authv1beta1.ResourceSlice); ok && o.Name == name && ev.Type != watch.Deleted && slices.Contains(o.Finalizers, wire.ProviderSliceFinalizer) {
					break wait
				}
			case <-deadline:
				t.Fatalf("the manager never gave slice %s its finalizer", name)
			}
		}
		w.Stop()
		if i%3 == 1 {
			time.Sleep(20 * time.Millisecond)
		}
		ref := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ta.Namespace}}
		require.NoError(t, asAlice.Patch(ctx, ref, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
		require.NoError(t, asAlice.Delete(ctx, ref))
		if i%2 == 1 {
			again := providerCopy(ta.Namespace, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
			_ = asAlice.Create(ctx, again)
		}
		var csrs []string
		for range 8 {
			time.Sleep(time.Second)
			if csrs = sliceCSRs(t, p, uid); len(csrs) == 0 {
				break
			}
		}
		if len(csrs) > 0 {
			leftovers = append(leftovers, fmt.Sprintf("try %d: slice %s/%s (uid %s) gone: requests %v remain", i, ta.Namespace, name, uid, csrs))
			break
		}
	}
	assert.Empty(t, leftovers, "no request made for a slice that is gone is left")
}

// TestAttack49StatusWriterConflictsTheFinalizerPatch: the finalizer's patch now carries the
// resourceVersion the reconcile read from its cache. A status writer (tenants/status in
// every namespace: no metadata, no spec) rewrites an honest Tenant's status in a loop from
// the moment it is created, so that the resourceVersion moves under every reconcile and the
// patch conflicts, after the nonce was consumed. Secure behaviour: once the writer stops,
// the honest handshake completes (the consumed nonce is the same handshake's, and a
// conflict is retried), and nothing is left made for it but its own request.
func TestAttack49StatusWriterConflictsTheFinalizerPatch(t *testing.T) {
	// Serial: a flood of status writes for 8 s (hammer).
	p := attack47Provider(t, "a49-conflict")
	ctx := context.Background()
	writer := principal(t, p, "tenant-status-writer", "", rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"),
		rule(authv1beta1.GroupVersion.Group, "tenants", "get", "list", "watch"))
	a := newAttacker(t, "cl-honest49")
	tn, nonce := freshNonce(t, p, a.id)
	tenant := a.honestTenant(t, tn, nonce)
	key := client.ObjectKeyFromObject(tenant)
	stop := hammer(func(n int) bool {
		got := &authv1beta1.Tenant{}
		if writer.Get(ctx, key, got) != nil {
			return false
		}
		got.Status.Conditions = append(got.Status.Conditions[:0:0], got.Status.Conditions...)
		meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: "Noise", Status: metav1.ConditionTrue, Reason: "Noise", Message: fmt.Sprint(n)})
		return writer.Status().Update(ctx, got) == nil
	})
	require.NoError(t, p.client.Create(ctx, tenant))
	time.Sleep(8 * time.Second)
	t.Logf("the status writer wrote %d times", stop())
	waitTenantCondition(t, p, key, authv1beta1.ConditionReady, metav1.ConditionTrue, "Ready")
	got := &authv1beta1.Tenant{}
	require.NoError(t, p.client.Get(ctx, key, got))
	assert.Contains(t, got.Finalizers, wire.TenantFinalizer)
	assert.NotEmpty(t, controlledBindings(t, p, tn, string(got.UID)))
}
