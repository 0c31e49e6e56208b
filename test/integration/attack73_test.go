package integration

// Attack 73 (helper-38 on 76cbd85): a Tenant being deleted now deletes the slice copies of
// the consumer it is named after (access.SliceConsumer: spec.consumerClusterID, else the
// label) in its recorded tenant namespace, and, with the manager's finalizer, is let go once
// none keeps the provider slice finalizer. A copy whose consumer was renamed, and a Tenant
// that goes without any finalizer, are outside that rule: their copies keep their grant
// (a denied slice keeps what it was granted).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// a73WaitTenantGone waits until the Tenant of c on p is gone.
func a73WaitTenantGone(t *testing.T, c, p *site) {
	t.Helper()
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}
	eventually(t, time.Minute, "the Tenant is gone", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, key, &authv1beta1.Tenant{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// a73CopyState describes the copy of slice name on p and its grant, for the logs.
func a73CopyState(t *testing.T, c, p *site, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := wire.TenantNamespaceName(c.id)
	var rs authv1beta1.ResourceSlice
	err := p.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rs)
	copyState := fmt.Sprintf("copy: err=%v", err)
	if err == nil {
		copyState = fmt.Sprintf("copy: finalizers %v, deleting %t, labels %v", rs.Finalizers, rs.DeletionTimestamp != nil, rs.Labels)
	}
	var rb rbacv1.RoleBinding
	rbErr := p.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.SliceAccessName(name)}, &rb)
	return fmt.Sprintf("%s; RoleBinding %s: err=%v", copyState, wire.SliceAccessName(name), rbErr)
}

// TestAttack73RenamedCopyOutlivesItsTenant acts with the tenant's own rights in its tenant
// namespace on the provider (resourceslices get, update: the control-plane role has them).
// The consumer holds an accepted slice; its controllers no longer write the copy (the
// local slice relabelled, as a hostile consumer that stops its controllers). The tenant
// rewrites the copy's spec.consumerClusterID to a cluster that is no consumer: the copy is
// denied as misplaced, which takes nothing back. The Tenant is then deleted (its own right,
// or the administrator's): the finalize deletes only the copies naming the Tenant's
// cluster, and lets the Tenant go. What must hold: once the Tenant is gone, no slice
// identity of that consumer still reads its copy.
func TestAttack73RenamedCopyOutlivesItsTenant(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-a73a"
	kc := a67Slice(t, c, p, name)
	a69Relabel(t, c, p, name)
	pTN := wire.TenantNamespaceName(c.id)
	tenantLike := principal(t, p, "tenant-like-a73a", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"),
		rule(authv1beta1.GroupVersion.Group, "tenants", "get", "delete"))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := tenantLike.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &rs); err != nil {
			return err
		}
		other := authv1beta1.ClusterID("cl-elsewhere73")
		rs.Spec.ConsumerClusterID = &other
		return tenantLike.Update(ctx, &rs)
	}))
	eventually(t, 30*time.Second, "the renamed copy is denied as misplaced", func(ctx context.Context) (bool, error) {
		var rs authv1beta1.ResourceSlice
		if err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &rs); err != nil {
			return false, err
		}
		cond := authv1beta1.SliceCondition(rs.Status.Conditions, authv1beta1.ResourceSliceConditionAuthentication)
		return rs.Status.ObservedGeneration == rs.Generation && cond != nil && cond.Status == authv1beta1.ResourceSliceDenied, nil
	})
	require.True(t, a67SliceStillReadsItsCopy(t, c, kc, name), "setup: the denied copy keeps its grant while the Tenant is there")

	require.NoError(t, tenantLike.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: c.id}}))
	a73WaitTenantGone(t, c, p)
	time.Sleep(3 * time.Second)
	t.Logf("after the Tenant is gone: %s", a73CopyState(t, c, p, name))
	assert.False(t, a67SliceStillReadsItsCopy(t, c, kc, name),
		"the Tenant was let go while a copy of its consumer's slice, its consumer renamed, still grants the slice identity its access")
}

// TestAttack73PeeringUserStripsTheFinalizerCopyKeepsItsGrant acts as the consumer's peering
// user on the provider (tenants get, patch, update, delete on its Tenant). The consumer
// holds an accepted slice. The peering user takes the manager's finalizer off its Tenant
// and deletes it, with a resourceVersion precondition so that the deletion lands only on
// the Tenant without the finalizer (the manager puts it back on an accepted Tenant; the
// user simply tries again). The Tenant goes at once: no finalize runs, and the reconcile
// of a gone Tenant deletes its orphaned bindings only. What must hold: once the Tenant is
// gone, no slice identity of that consumer still reads its copy.
func TestAttack73PeeringUserStripsTheFinalizerCopyKeepsItsGrant(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-a73b"
	kc := a67Slice(t, c, p, name)
	pTN := wire.TenantNamespaceName(c.id)
	peer := principal(t, p, "liqo-peer-user-a73b", pTN, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "patch", "update", "delete"))
	key := client.ObjectKey{Namespace: pTN, Name: c.id}
	deleted := false
	for try := 0; try < 50 && !deleted; try++ {
		ten := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: c.id}}
		require.NoError(t, peer.Patch(ctx, ten, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
		if len(ten.Finalizers) > 0 {
			t.Logf("try %d: finalizers still %v", try, ten.Finalizers)
			continue
		}
		uid, rv := ten.UID, ten.ResourceVersion
		err := peer.Delete(ctx, ten, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsConflict(err) {
			t.Logf("try %d: the manager put its finalizer back first", try)
			continue
		}
		require.NoError(t, err)
		deleted = true
	}
	require.True(t, deleted, "setup: the peering user deleted its Tenant without the manager's finalizer")
	err := p.client.Get(ctx, key, &authv1beta1.Tenant{})
	t.Logf("right after the deletion, the Tenant: %v", err)
	a73WaitTenantGone(t, c, p)
	time.Sleep(3 * time.Second)
	t.Logf("after the Tenant is gone: %s", a73CopyState(t, c, p, name))
	assert.False(t, a67SliceStillReadsItsCopy(t, c, kc, name),
		"the Tenant went without its finalizer and the copy of its consumer's slice still grants the slice identity its access")
}

// TestAttack73PlantedSliceWithTheConsumersFinalizerStillGoesFirst acts with the rights
// the tenant's role gives in its tenant namespace (resourceslices create, get, update): in
// a two-way peering the provider P writes slices in liqo-tenant-P on C. As in
// TestAttack71PlantedSliceWithAFinalizerStillStopsTheTeardown, the writer plants a slice
// named to sort first with a finalizer of its own, but also puts the consumer slice
// controller's finalizer on it: 76cbd85's requestsFirst orders the slices carrying that
// finalizer first ("a slice anyone else holds with a finalizer of its own, named to sort
// first, does not keep them"), and a finalizer is anyone's to write. What must hold (the
// commit's claim): the real slice is removed with its access, whatever the planted slice
// carries.
func TestAttack73PlantedSliceWithTheConsumersFinalizerStillGoesFirst(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := a67Slice(t, c, p, "slice-a73c")
	plantHeldSlice(t, c, p, "tenant-like-a73c", wire.ConsumerSliceFinalizer, "example.com/a73-planted")

	_, errOut, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices", "--timeout", "30s")
	t.Logf("run: err=%v\n%s", err, errOut)
	assert.False(t, a67SliceStillReadsItsCopy(t, c, kc, "slice-a73c"),
		"a slice planted with the consumer's finalizer and one of its own still goes first and stops the teardown before the real slice, which keeps its access")
}
