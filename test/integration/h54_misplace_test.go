package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestH54SliceWriterMovesItsSliceToAnotherProvider: the consumer's slice writer (get,
// update) sets the remote-cluster-id label of an accepted slice to another cluster, the
// request label kept. What must hold: the slice's copy is still removed when the slice is
// deleted (liqoctl delete resourceslice), and its entry in SliceCopies is forgotten (no
// leaked entry counts toward MaxSliceCopies).
func TestH54SliceWriterMovesItsSliceToAnotherProvider(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-h54m"
	kc := a67Slice(t, c, p, name)
	cTN := wire.TenantNamespaceName(p.id)
	cw := principal(t, c, "h54-c-slice-writer", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	key := client.ObjectKey{Namespace: cTN, Name: name}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := cw.Get(ctx, key, &rs); err != nil {
			return err
		}
		rs.Labels[wire.RemoteClusterIDLabel] = "cl-other"
		return cw.Update(ctx, &rs)
	}))
	time.Sleep(3 * time.Second)
	var rs authv1beta1.ResourceSlice
	require.NoError(t, c.client.Get(ctx, key, &rs))
	t.Logf("finalizer kept: %v; labels %v", controllerutil.ContainsFinalizer(&rs, wire.ConsumerSliceFinalizer), rs.Labels)
	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	t.Logf("delete resourceslice (took %v): %v\n%s", took, err, errOut)
	time.Sleep(3 * time.Second)
	t.Logf("after: %s", a73CopyState(t, c, p, name))
	if a67SliceStillReadsItsCopy(t, c, kc, name) {
		assert.Error(t, err, "BROKEN: delete resourceslice succeeded while the slice identity still reads its copy")
	}
	// The entry of the slice gone without its finalize counts for nothing, and goes with
	// the next copy recorded.
	require.NoError(t, c.client.Create(ctx, localSlice(c, p, name+"-next", "", "1")))
	sliceKubeconfig(t, c, p, name+"-next")
	rec, recErr := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, recErr)
	assert.Empty(t, rec.SliceCopies[name], "leaked SliceCopies entry of a slice gone")
	assert.NotEmpty(t, rec.SliceCopies[name+"-next"], "the next slice's copy is recorded")
}
