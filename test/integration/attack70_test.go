package integration

// Attack 70 (helper-36 on c244b87, by reading): a proof takes a certificate for any key of
// the cluster's set, the previous one included, so that an honest key rotation still
// proves. Around a rotation the provider binds a slice as the key group of its current
// request only: the slice's older certificate matches no binding and finds nothing.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestAttack70IdentityWriterPutsBackTheSlicesOlderCertificate acts as an Identity writer of
// the consumer's tenant namespace (identities get, update, delete) after a key rotation.
// It deletes the control-plane Identity (the slice controller can no longer reach the
// provider: the local slice goes, its copy and binding stay, and nothing writes the
// slice's Identity again) and puts the slice's certificate for the previous key back in
// the slice's Identity. What must hold: the proof asks with the certificate of the slice's
// status too, finds the binding of the current key, and the command fails or the access is
// gone.
func TestAttack70IdentityWriterPutsBackTheSlicesOlderCertificate(t *testing.T) {
	t.Parallel()
	c, p := sliceSites(t)
	ctx := context.Background()
	const name = "slice-a70"
	oldKC, newKC, _ := rotatedSlice(t, c, p, name)
	old, err := authn.ReadKubeconfig(oldKC)
	require.NoError(t, err)

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update", "delete"))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(p.id)}}))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var id authv1beta1.Identity
		if getErr := writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(name)}, &id); getErr != nil {
			return getErr
		}
		id.Spec.AuthParams.SignedCRT = old.CertPEM
		return writer.Update(ctx, &id)
	}))

	_, errOut, err := runCLI(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, newKC, name, errOut, err)
}
