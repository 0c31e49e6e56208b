package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestSliceNameTakenByTheProvidersOwnRequest (helper-36's F3): in a two-way peering the
// provider's tenant namespace of the consumer holds the provider's own requests of the
// consumer beside the consumer's copies. Both sides asking under one name at once, before
// either copy arrived (two GitOps repositories applied together), the consumer's slice
// controller rewrote the provider's request with its own spec, and deleted it with its
// own slice. Acting as the provider's ResourceSlice writer of that namespace (the author
// of its requests; resourceslices create, get there), the request is made first; then the
// consumer asks under the same name. What must hold: the provider's request is neither
// rewritten nor deleted, the consumer's slice gets no answer from it and says its name is
// taken, and it goes when deleted.
func TestSliceNameTakenByTheProvidersOwnRequest(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	theirs, mine, writer := nameTaken(t, c, p, "slice-taken")
	want := theirs.DeepCopy()
	// The consumer's controller reads the provider's slice once a reconcile at first, then
	// every 30 s: a second look finds it as it was.
	time.Sleep(time.Second)
	var got authv1beta1.ResourceSlice
	require.NoError(t, writer.Get(ctx, client.ObjectKeyFromObject(theirs), &got))
	// The provider's own consumer controller completes its request (cluster IDs, CSR); the
	// resources asked are the provider's, never the consumer's.
	assert.True(t, equality.Semantic.DeepEqual(want.Spec.Resources, got.Spec.Resources), "the provider's request was rewritten: %+v", got.Spec.Resources)
	assert.Equal(t, authv1beta1.ClusterID(c.id), ptr.Deref(got.Spec.ProviderClusterID, authv1beta1.ClusterID(c.id)), "the provider's request was rewritten to ask another provider")
	assert.Equal(t, want.Labels, got.Labels, "the provider's request was relabelled")
	require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(mine), mine))
	assert.Nil(t, mine.Status.AuthParams, "the consumer's slice took an answer from the provider's request")
	assert.Empty(t, mine.Status.Conditions, "the consumer's slice took a verdict from the provider's request")

	deleteSliceAndWait(t, c, mine)
	require.NoError(t, writer.Get(ctx, client.ObjectKeyFromObject(theirs), &got), "the provider's request was deleted with the consumer's slice")
	assert.Nil(t, got.DeletionTimestamp, "the provider's request is being deleted")
	assert.True(t, equality.Semantic.DeepEqual(want.Spec.Resources, got.Spec.Resources), "the provider's request was rewritten: %+v", got.Spec.Resources)
}

// nameTaken peers c with p for slices and makes, under name, the provider's own request of
// c first (as its ResourceSlice writer of p's tenant namespace of c: resourceslices
// create, get, returned as writer), then c's slice, and waits for c's slice to say its
// name is taken.
func nameTaken(t *testing.T, c, p *site, name string) (theirs, mine *authv1beta1.ResourceSlice, writer client.Client) {
	t.Helper()
	ctx := context.Background()
	peerForSlices(t, c, p)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	writer = principal(t, p, "provider-slice-writer", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "create", "get"))
	theirs = localSlice(p, c, name, "", "3")
	require.NoError(t, writer.Create(ctx, theirs), "setup: the provider's own request of the consumer")
	mine = localSlice(c, p, name, "", "1")
	require.NoError(t, c.client.Create(ctx, mine))
	waitEvent(t, c, cTN, name, authv1beta1.ReasonSliceNameTaken)
	return theirs, mine, writer
}

// deleteSliceAndWait deletes c's slice rs and waits until it is gone.
func deleteSliceAndWait(t *testing.T, c *site, rs *authv1beta1.ResourceSlice) {
	t.Helper()
	require.NoError(t, c.client.Delete(context.Background(), rs))
	eventually(t, 20*time.Second, "the consumer's slice goes", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSlice{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
