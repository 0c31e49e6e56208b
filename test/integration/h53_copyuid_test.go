package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// h53CopyAnnotation is where 9b740a0 recorded the UID of a slice's copy, on the slice
// itself, whose writers may write it: helper-53 broke that record (these tests); the
// record is now in the tenant record (SliceCopies), and the annotation means nothing.
const h53CopyAnnotation = "liqo.io/resourceslice-copy-uid"

// h53SetCopyUID merge-patches, as w, the copy-UID annotation of the consumer's slice (nil: removed).
func h53SetCopyUID(ctx context.Context, w client.Client, key client.ObjectKey, uid *string) error {
	v := "null"
	if uid != nil {
		v = fmt.Sprintf("%q", *uid)
	}
	rs := &authv1beta1.ResourceSlice{}
	rs.Namespace, rs.Name = key.Namespace, key.Name
	return w.Patch(ctx, rs, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+h53CopyAnnotation+`":`+v+`}}}`)))
}

// TestH53SliceWriterForgetsTheCopyProviderWriterRelabels: helper-52's break with a
// consumer-side ResourceSlice writer's help. The provider's update-only slice writer
// strips the replicated label of the consumer's copy (the provider finalizes it); the
// consumer's slice writer of its tenant namespace (resourceslices get, update, patch)
// removes the copy-UID annotation from the consumer's slice; the administrator gives the
// slice back (liqoctl delete resourceslice: verified); the provider's writer puts the
// label back. What must hold: the slice's user is never granted again.
func TestH53SliceWriterForgetsTheCopyProviderWriterRelabels(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-h53a"
	kc := a67Slice(t, c, p, name)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	pw := principal(t, p, "h53-p-slice-updater", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	cw := principal(t, c, "h53-c-slice-writer", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "patch"))
	pkey := client.ObjectKey{Namespace: pTN, Name: name}
	ckey := client.ObjectKey{Namespace: cTN, Name: name}

	var mine authv1beta1.ResourceSlice
	require.NoError(t, cw.Get(ctx, ckey, &mine))
	t.Logf("the consumer's slice records: %q", mine.Annotations[h53CopyAnnotation])

	require.NoError(t, h52Relabel(ctx, pw, pkey, ""), "the provider's writer strips the replicated label")
	waitProviderFinalized(t, p, pkey)
	require.NoError(t, h53SetCopyUID(ctx, cw, ckey, nil), "the consumer's slice writer removes the copy's UID")
	time.Sleep(2 * time.Second) // the consumer's controller reconciles the update
	require.NoError(t, cw.Get(ctx, ckey, &mine))
	t.Logf("the consumer's slice records now: %q", mine.Annotations[h53CopyAnnotation])
	t.Logf("before the teardown: %s", a73CopyState(t, c, p, name))

	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	require.NoError(t, err, "delete resourceslice (took %v)\n%s", took, errOut)
	require.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	t.Logf("after the teardown: %s", a73CopyState(t, c, p, name))
	h52AssertNoRegrant(t, c, p, pw, kc, name)
}

// TestH53SliceWriterAdoptsTheProvidersOwnRequest: the setup of
// TestSliceNameTakenByTheProvidersOwnRequest (the provider's own request of the consumer
// and the consumer's slice under one name). A reader of the provider's tenant namespace
// (resourceslices get) reads the UID of the provider's request; the consumer's slice
// writer (get, update, patch) writes it as the copy-UID annotation of the consumer's
// slice. What must hold: the provider's request is neither rewritten nor deleted by the
// consumer's controller.
func TestH53SliceWriterAdoptsTheProvidersOwnRequest(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	theirs, mine, _ := nameTaken(t, c, p, "slice-h53b")
	want := theirs.DeepCopy()
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	reader := principal(t, p, "h53-p-slice-reader", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get"))
	cw := principal(t, c, "h53-c-slice-writer", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "patch"))

	var got authv1beta1.ResourceSlice
	require.NoError(t, reader.Get(ctx, client.ObjectKeyFromObject(theirs), &got))
	uid := string(got.UID)
	require.NoError(t, h53SetCopyUID(ctx, cw, client.ObjectKeyFromObject(mine), &uid), "the consumer's slice writer records the provider's request as the copy")
	time.Sleep(3 * time.Second)
	require.NoError(t, reader.Get(ctx, client.ObjectKeyFromObject(theirs), &got))
	assert.True(t, equality.Semantic.DeepEqual(want.Spec.Resources, got.Spec.Resources), "BROKEN: the provider's request was rewritten with the consumer's spec: %+v", got.Spec.Resources)
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(mine), mine))
	t.Logf("the consumer's slice status: %+v", mine.Status.Conditions)

	deleteSliceAndWait(t, c, mine)
	err := reader.Get(ctx, client.ObjectKeyFromObject(theirs), &got)
	if assert.NoError(t, err, "BROKEN: the provider's request was deleted with the consumer's slice") {
		assert.Nil(t, got.DeletionTimestamp, "BROKEN: the provider's request is being deleted")
	}
}

// TestH53UpdateOnlyWriterHoldsAndStripsTheCopy: the provider's update-only slice writer
// puts a finalizer of its own on the consumer's copy and strips its replicated label (the
// provider finalizes it); the administrator gives the slice back (the copy, deleted, stays
// held); the writer puts the label back on the terminating copy. What must hold: the
// slice's user is never granted again.
func TestH53UpdateOnlyWriterHoldsAndStripsTheCopy(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-h53c"
	const hold = "example.com/h53-hold"
	kc := a67Slice(t, c, p, name)
	pTN := wire.TenantNamespaceName(c.id)
	pw := principal(t, p, "h53-p-slice-updater", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	pkey := client.ObjectKey{Namespace: pTN, Name: name}
	t.Cleanup(func() {
		var rs authv1beta1.ResourceSlice
		if p.client.Get(context.Background(), pkey, &rs) == nil {
			controllerutil.RemoveFinalizer(&rs, hold)
			_ = p.client.Update(context.Background(), &rs)
		}
	})
	var rs authv1beta1.ResourceSlice
	require.NoError(t, pw.Get(ctx, pkey, &rs))
	controllerutil.AddFinalizer(&rs, hold)
	delete(rs.Labels, wire.ReplicationStatusLabel)
	require.NoError(t, pw.Update(ctx, &rs))
	waitProviderFinalized(t, p, pkey)
	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	require.NoError(t, err, "delete resourceslice (took %v)\n%s", took, errOut)
	t.Logf("after the teardown: %s", a73CopyState(t, c, p, name))
	h52AssertNoRegrant(t, c, p, pw, kc, name)
}

// TestH53StatusWriterCannotWriteTheCopyUID: a status writer of resourceslices (update,
// patch of resourceslices/status) tries to set the copy-UID annotation through the status
// subresource. What must hold: the annotation is unchanged.
func TestH53StatusWriterCannotWriteTheCopyUID(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	cTN := wire.TenantNamespaceName(p.id)
	require.NoError(t, client.IgnoreAlreadyExists(c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cTN}})))
	mine := localSlice(c, p, "slice-h53d", "", "1")
	mine.Annotations = map[string]string{h53CopyAnnotation: "orig"}
	require.NoError(t, c.client.Create(ctx, mine))
	sw := principal(t, c, "h53-status-writer", "", rule(authv1beta1.GroupVersion.Group, "resourceslices/status", "update", "patch"))
	rs := mine.DeepCopy()
	rs.Annotations[h53CopyAnnotation] = "forged"
	err := sw.Status().Update(ctx, rs)
	t.Logf("status update: %v", err)
	err = sw.Status().Patch(ctx, rs, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+h53CopyAnnotation+`":"forged2"}}}`)))
	t.Logf("status patch: %v", err)
	var got authv1beta1.ResourceSlice
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(mine), &got))
	assert.Equal(t, "orig", got.Annotations[h53CopyAnnotation])
}
