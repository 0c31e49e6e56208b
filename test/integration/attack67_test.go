package integration

// Attack 67 (helper-33 on 2216403): the namespace in which `liqoctl delete resourceslice`
// (handshake.DeleteSlices) proves a slice's revocation, and in which the consumer's slice
// controller removes the slice's copy, is the control-plane Identity's spec.namespace: an
// Identity writer's field, checked for nothing but being non-empty (identity controller)
// and a DNS label (CRD).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// a67SliceStillReadsItsCopy says whether the slice identity (kubeconfig kc) may still read
// its copy on the provider, in the provider's real tenant namespace of c.
func a67SliceStillReadsItsCopy(t *testing.T, c *site, kc []byte, name string) bool {
	t.Helper()
	sc := newClient(t, restConfigFromKubeconfig(t, kc))
	err := sc.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: name}, &authv1beta1.ResourceSlice{})
	return err == nil
}

// peerForSlices peers c with p directly, through a peering user of p's manager, and runs
// c's controllers in-process: c's slices are asked of p from then on.
func peerForSlices(t *testing.T, c, p *site) {
	t.Helper()
	pu := peeringUserKubeconfig(t, c, p)
	mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	startControllers(t, c, authmanager.Consumer)
}

// a67Slice peers c with p directly (no proxy, a peering user of p's manager; c's
// controllers in-process), has slice name accepted and returns its identity's kubeconfig,
// checked to read the copy on the provider.
func a67Slice(t *testing.T, c, p *site, name string) []byte {
	t.Helper()
	peerForSlices(t, c, p)
	rs := localSlice(c, p, name, "", "1")
	require.NoError(t, c.client.Create(context.Background(), rs))
	kc := sliceKubeconfig(t, c, p, name)
	require.True(t, a67SliceStillReadsItsCopy(t, c, kc, name), "setup: the slice identity reads its copy")
	return kc
}

// a67AssertNoFalseProof: either the command fails, or the slice identity lost its access.
func a67AssertNoFalseProof(t *testing.T, c, p *site, kc []byte, name, errOut string, err error) {
	t.Helper()
	t.Logf("delete resourceslice: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, name) {
		assert.Error(t, err, "delete resourceslice succeeded while the slice identity still reads its copy on the provider")
		assert.NotContains(t, errOut, "Access of the slice's identity revoked: verified",
			"the revocation was 'verified' in a namespace an Identity writer chose, and the copy with its grant stays in %s", wire.TenantNamespaceName(c.id))
		var left authv1beta1.ResourceSlice
		if p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: name}, &left) == nil && err != nil {
			assert.Contains(t, err.Error(), "-n "+wire.TenantNamespaceName(c.id)+" "+name, "the advice names the namespace the copy is in")
		}
	}
}

// TestAttack67IdentityWriterMovesTheSlicesRevocationProof acts as an Identity writer of the
// consumer's tenant namespace (identities get, update). The consumer peered directly and
// holds an accepted slice. The writer sets the control-plane Identity's spec.namespace to
// "default" (a valid DNS label: the CRD takes it; the identity controller checks only that
// it is not empty). The administrator then gives the slice back with liqoctl delete
// resourceslice. What must hold: the command never says the slice's access is revoked
// (verified) while the slice identity still reads its copy on the provider. Found by
// helper-33 on 2216403 (by reading; the test fails there): the consumer's slice controller asks for the copy in "default", is Forbidden,
// and lets the local slice go (consumerslice.finalize treats Forbidden as gone); the proof
// asks SelfSubjectAccessReviews in "default" and cluster-wide only, finds nothing, and
// says "Access of the slice's identity revoked: verified with its own certificate"; the
// copy and its Role/RoleBinding stay in the provider's tenant namespace.
func TestAttack67IdentityWriterMovesTheSlicesRevocationProof(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kc := a67Slice(t, c, p, "slice-a67")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "update"))
	var id authv1beta1.Identity
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	id.Spec.Namespace = ptr.To("default")
	require.NoError(t, writer.Update(ctx, &id))

	_, errOut, err := runCLI(t, "delete", "resourceslice", "slice-a67", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, kc, "slice-a67", errOut, err)
}

// TestAttack67IdentityWriterDeletesTheControlPlaneIdentityBeforeASlicesDeletion acts as an
// Identity writer of the consumer's tenant namespace (identities get, delete). It deletes
// the control-plane Identity; the administrator then runs liqoctl delete resourceslice.
// DeleteSlices ignores the missing Identity (remoteNS ""), the slice controller cannot
// reach the provider (no control-plane Identity) and lets the slice go with an event, and
// the proof asks cluster-wide only. What must hold: as above, no "verified" while the
// slice identity still reads its copy.
func TestAttack67IdentityWriterDeletesTheControlPlaneIdentityBeforeASlicesDeletion(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	kc := a67Slice(t, c, p, "slice-a67b")

	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "get", "delete"))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(p.id)}}))

	_, errOut, err := runCLI(t, "delete", "resourceslice", "slice-a67b", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	a67AssertNoFalseProof(t, c, p, kc, "slice-a67b", errOut, err)
}
