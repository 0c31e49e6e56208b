package integration

// Attack 72 (helper-35's finding on 6ebf645, principal 5): a status writer of the
// provider's copy of a slice publishes a certificate of its own in the copy's status; the
// consumer copied it into the local slice and its Identity, and the honest deletion of the
// slice then failed with "revocation not proven".

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestAttack72ProviderStatusWriterForgesTheSlicesCertificate acts as a status writer of
// ResourceSlices in the consumer's tenant namespace on the provider (resourceslices get,
// resourceslices/status update). It replaces the certificate of an accepted slice's copy
// with one it signed itself for the slice's user and the consumer's public key. The
// consumer then reads the answer back (its recheck, brought forward by a touch of the
// slice). What must hold: the forged certificate reaches neither the local slice nor its
// Identity, and the administrator's deletion of the slice proves the revocation.
func TestAttack72ProviderStatusWriterForgesTheSlicesCertificate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-a72"
	a67Slice(t, c, p, name)

	group := authv1beta1.GroupVersion.Group
	writer := principal(t, p, "slice-status-writer", wire.TenantNamespaceName(c.id), rule(group, "resourceslices", "get"), rule(group, "resourceslices/status", "update"))
	copyKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: name}
	var cp authv1beta1.ResourceSlice
	require.NoError(t, writer.Get(ctx, copyKey, &cp))
	honest := cp.Status.AuthParams.SignedCRT
	forged := a69Forge(t, honest)
	cp.Status.AuthParams.SignedCRT = forged
	require.NoError(t, writer.Status().Update(ctx, &cp))

	localKey := client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: name}
	var local authv1beta1.ResourceSlice
	require.NoError(t, c.client.Get(ctx, localKey, &local))
	patch := client.MergeFrom(local.DeepCopy())
	local.Annotations = map[string]string{"test.liqo-auth.io/touch": "1"}
	require.NoError(t, c.client.Patch(ctx, &local, patch))
	// Read back: the local slice then holds the forged certificate (the hole), a new one the
	// provider published, or keeps its own and says it refused the answer.
	eventually(t, 30*time.Second, "the consumer read the provider's answer again", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, localKey, &local); err != nil {
			return false, err
		}
		if string(local.Status.AuthParams.SignedCRT) != string(honest) {
			return true, nil
		}
		return hasWarning(ctx, c, localKey.Namespace, name, authv1beta1.ReasonSliceCertificateRefused)
	})
	assert.NotEqual(t, string(forged), string(local.Status.AuthParams.SignedCRT), "the status writer's certificate reached the local slice")
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: localKey.Namespace, Name: wire.SliceIdentityName(name)}, &id))
	assert.NotEqual(t, string(forged), string(id.Spec.AuthParams.SignedCRT), "the status writer's certificate reached the slice's Identity")

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	require.NoError(t, err, "an honest deletion after the forgery")
	assert.Contains(t, errOut, "Access of the slice's identity revoked: verified")
}
