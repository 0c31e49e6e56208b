package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestH54UpdateOnlyWriterHasTheProvidersRequestAdoptedThenDeleted: the setup of
// TestSliceNameTakenByTheProvidersOwnRequest. The provider's update-only slice writer
// (get, update: no delete) labels the provider's own request replicated=true for a
// moment: the consumer took it for its copy and recorded its UID (1cefc78); the label
// comes off again. What must hold: once it is no copy again, the consumer's slice deletion does not
// delete the provider's own request (before SliceCopies, the label gone released it).
func TestH54UpdateOnlyWriterHasTheProvidersRequestAdoptedThenDeleted(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-h54b"
	theirs, mine, _ := nameTaken(t, c, p, name)
	pw := principal(t, p, "h54-p-slice-updater", wire.TenantNamespaceName(c.id), rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))

	key := client.ObjectKeyFromObject(theirs)
	require.NoError(t, h52Relabel(ctx, pw, key, "true"))
	// wake the consumer's slice (its NameTaken retry is 30 s)
	require.NoError(t, c.client.Patch(ctx, mine, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"h54-wake":"1"}}}`))))
	// While labelled it is a copy, which the consumer writes (the writer could as well):
	// once it did, it never records it as the copy it made.
	eventually(t, 40*time.Second, "the consumer writes the labelled request as a copy", func(ctx context.Context) (bool, error) {
		var got authv1beta1.ResourceSlice
		if err := p.client.Get(ctx, key, &got); err != nil {
			return false, err
		}
		return got.Spec.Resources.Cpu().String() == "1", nil
	})
	rec, recErr := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, recErr)
	require.NotNil(t, rec)
	assert.Empty(t, rec.SliceCopies[name], "a copy found on the provider was recorded as the one the consumer made")
	require.NoError(t, h52Relabel(ctx, pw, key, ""))
	time.Sleep(2 * time.Second)
	deleteSliceAndWait(t, c, mine)
	var got authv1beta1.ResourceSlice
	err := p.client.Get(ctx, key, &got)
	if assert.NoError(t, err, "BROKEN: the provider's own request (no label then) was deleted with the consumer's slice, by an update-only writer's label of a moment") {
		assert.Nil(t, got.DeletionTimestamp, "BROKEN: the provider's request is being deleted")
	}
}
