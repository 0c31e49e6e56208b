package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// h52Relabel sets (or removes, when value is "") the replicated label of the copy as w.
func h52Relabel(ctx context.Context, w client.Client, key client.ObjectKey, value string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := w.Get(ctx, key, &rs); err != nil {
			return err
		}
		if value == "" {
			delete(rs.Labels, wire.ReplicationStatusLabel)
		} else {
			if rs.Labels == nil {
				rs.Labels = map[string]string{}
			}
			rs.Labels[wire.ReplicationStatusLabel] = value
		}
		return w.Update(ctx, &rs)
	})
}

// h52StripThenDelete: the copy's replicated label is taken off (by w) before the
// consumer gives the slice back; the provider finalizes it (grant and finalizer gone).
// liqoctl delete resourceslice must succeed, verified. It returns the slice kubeconfig.
func h52StripThenDelete(t *testing.T, c, p *site, writer func() client.Client, name string) ([]byte, client.Client) {
	t.Helper()
	ctx := context.Background()
	kc := a67Slice(t, c, p, name)
	w := writer()
	pTN := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: pTN, Name: name}
	require.NoError(t, h52Relabel(ctx, w, key, ""), "the attacker strips the replicated label")
	waitProviderFinalized(t, p, key)
	t.Logf("before the teardown: %s", a73CopyState(t, c, p, name))

	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	require.NoError(t, err, "delete resourceslice (took %v)\n%s", took, errOut)
	require.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	t.Logf("after the teardown: %s", a73CopyState(t, c, p, name))
	return kc, w
}

// h52AssertNoRegrant: after the attacker puts the label back, the slice's user must never
// be granted again (the consumer's liqoctl said its access is revoked, verified).
func h52AssertNoRegrant(t *testing.T, c, p *site, w client.Client, kc []byte, name string) {
	t.Helper()
	ctx := context.Background()
	pTN := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: pTN, Name: name}
	err := h52Relabel(ctx, w, key, "true")
	t.Logf("the attacker puts the replicated label back on the left copy: %v", err)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if a74SliceUserMay(t, c, p, kc, "get", name) {
			t.Logf("after the relabel: %s", a73CopyState(t, c, p, name))
			t.Errorf("BROKEN: the slice's user %s is granted again after liqoctl said its revocation is verified; RoleBindings %v",
				authn.SliceUserName(name, c.id), a74BindingsOf(t, p, pTN, authn.SliceUserName(name, c.id)))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	assert.Empty(t, a74BindingsOf(t, p, pTN, authn.SliceUserName(name, c.id)))
	t.Logf("held: %s", a73CopyState(t, c, p, name))
}

// TestH52UpdateOnlyWriterKeepsCopyPastDeletion: a ResourceSlice writer of the provider's
// tenant namespace with get and update only (no create: it cannot make a copy again
// once it is gone), by impersonation, strips the replicated label of the consumer's copy,
// the consumer gives the slice back (liqoctl: verified), then it puts the label back.
func TestH52UpdateOnlyWriterKeepsCopyPastDeletion(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const name = "slice-h52a"
	kc, w := h52StripThenDelete(t, c, p, func() client.Client {
		return principal(t, p, "h52-slice-updater", wire.TenantNamespaceName(c.id),
			rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update"))
	}, name)
	h52AssertNoRegrant(t, c, p, w, kc, name)
}

// waitProviderFinalized waits until p's slice controller has finalized the copy at key
// (relabelled: no longer a copy): its finalizer off and the slice's RoleBinding gone.
func waitProviderFinalized(t *testing.T, p *site, key client.ObjectKey) {
	t.Helper()
	eventually(t, 20*time.Second, "the provider finalizes the relabelled copy", func(ctx context.Context) (bool, error) {
		var rs authv1beta1.ResourceSlice
		if err := p.client.Get(ctx, key, &rs); err != nil {
			return false, err
		}
		err := p.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: wire.SliceAccessName(key.Name)}, &rbacv1.RoleBinding{})
		return !controllerutil.ContainsFinalizer(&rs, wire.ProviderSliceFinalizer) && apierrors.IsNotFound(err), nil
	})
}
