package integration

// Attack 75 (helper-39's F4, by reading): a ResourceSlice writer of the consumer's tenant
// namespace strips the consumer controllers' finalizer and request label off an accepted
// slice, and holds it with a finalizer of its own; the consumer's administrator then
// deletes it. The consumer's controllers never finalize it (it is no request of theirs
// any more), and the garbage collector keeps what it controls while it exists: its
// Identity, with the slice identity's credential, stayed beside a slice said "deleted here,
// and its Identity".

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack75HeldSliceKeepsNoIdentity acts as the slice writer (resourceslices get,
// update). What must hold: the slice's Identity is gone once the command ends, the command
// does not say the Identity went with the slice, and it fails naming the copy left on the
// provider with its grant (the consumer's controllers never gave it back).
func TestAttack75HeldSliceKeepsNoIdentity(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const name, hold = "slice-a75", "example.com/a75-hold"
	kc := a67Slice(t, c, p, name)
	ns := wire.TenantNamespaceName(p.id)
	idKey := client.ObjectKey{Namespace: ns, Name: wire.SliceIdentityName(name)}
	require.NoError(t, c.client.Get(context.Background(), idKey, &authv1beta1.Identity{}), "setup: the slice has its Identity")

	writer := principal(t, c, "slice-writer-a75", ns, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	key := client.ObjectKey{Namespace: ns, Name: name}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := writer.Get(context.Background(), key, &rs); err != nil {
			return err
		}
		delete(rs.Labels, wire.ReplicationRequestedLabel)
		controllerutil.RemoveFinalizer(&rs, wire.ConsumerSliceFinalizer)
		controllerutil.AddFinalizer(&rs, hold)
		return writer.Update(context.Background(), &rs)
	}))
	t.Cleanup(func() {
		var rs authv1beta1.ResourceSlice
		if c.client.Get(context.Background(), key, &rs) == nil {
			rs.Finalizers = nil
			_ = c.client.Update(context.Background(), &rs)
		}
	})

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--timeout", "30s")
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	eventually(t, 30*time.Second, "the held slice's Identity is gone", func(ctx context.Context) (bool, error) {
		getErr := c.client.Get(ctx, idKey, &authv1beta1.Identity{})
		return apierrors.IsNotFound(getErr), client.IgnoreNotFound(getErr)
	})
	assert.NotContains(t, errOut, "deleted here, and its Identity", "said while the Identity stayed")
	assert.Contains(t, errOut, "stays, held by finalizers that are not this project's: "+hold)
	if a67SliceStillReadsItsCopy(t, c, kc, name) {
		require.Error(t, err, "the command succeeded while the slice identity still reads its copy")
		assert.Contains(t, err.Error(), "-n "+wire.TenantNamespaceName(c.id)+" "+name, "the advice names the copy left on the provider")
	}
}
