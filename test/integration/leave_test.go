package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestConsumerLeaves: a consumer leaves its provider with the only credential it holds
// there, its own identity (the provider's kubeconfig is used only to set up, and to check
// as its administrator afterwards). Another tenant's identity and a slice identity, acting
// with their real certificates, cannot delete its Tenant. Leaving deletes its slices first,
// its Tenant, proves the revocation with its own certificate and removes its Identity;
// re-run, there is nothing to leave.
func TestConsumerLeaves(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	other := &site{cp: testenv.New(t, "other-consumer")[0], id: "cl-other"}
	other.client = newClient(t, other.cp.Config)
	mustCLI(t, "install", "--kubeconfig", other.cp.Kubeconfig, "--cluster-id", other.id)
	startManager(t, p)
	ctx := context.Background()
	for _, s := range []*site{c, other} {
		mustCLI(t, pairArgs("authenticate", s, p)...)
	}
	const slice = "slice-leave"
	mustCLI(t, "create", "resourceslice", slice, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--cpu", "1")
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	tenant := &authv1beta1.Tenant{ObjectMeta: metaOf(pTN, c.id)}

	t.Run("no one else may delete its Tenant", func(t *testing.T) {
		var sec corev1.Secret
		require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(wire.SliceIdentityName(slice))}, &sec))
		for who, kubeconfig := range map[string][]byte{
			"the slice's identity": sec.Data[wire.KubeconfigField],
			"another tenant":       kubeconfigOf(t, other, p),
		} {
			user := newClient(t, restConfigFromKubeconfig(t, kubeconfig))
			err := user.Delete(ctx, tenant.DeepCopy())
			assert.True(t, apierrors.IsForbidden(err), "%s deletes the consumer's Tenant: %v", who, err)
		}
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tenant), &authv1beta1.Tenant{}), "still there")
	})

	t.Run("slices are refused without --delete-resourceslices", func(t *testing.T) {
		_, _, err := runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--delete-resourceslices")
		_, _, err = runCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--leave")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--leave goes with --remote-cluster-id")
	})

	t.Run("it leaves with its own identity", func(t *testing.T) {
		_, errOut := mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--delete-resourceslices")
		assertInOrder(t, errOut, []string{
			"INFO (local) ResourceSlice " + slice + " deleted here, and its Identity",
			"INFO (local) Access of the slice's identity revoked: verified with its own certificate",
			"INFO (local) Tenant " + pTN + "/" + c.id + " deleted on provider \"" + p.id + "\" with this cluster's identity",
			"INFO (local) Access on provider \"" + p.id + "\" revoked: verified with this cluster's own certificate",
			"INFO (local) Identity, kubeconfig and signed nonce removed",
		})
		// As the provider's administrator: nothing of it is left.
		err := p.client.Get(ctx, client.ObjectKeyFromObject(tenant), &authv1beta1.Tenant{})
		assert.True(t, apierrors.IsNotFound(err), "its Tenant is gone: %v", err)
		for _, name := range []string{wire.TenantReaderName, wire.ControlPlaneBindingName, wire.SliceAccessName(slice)} {
			bindingErr := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &rbacv1.RoleBinding{})
			assert.True(t, apierrors.IsNotFound(bindingErr), "binding %s is gone: %v", name, bindingErr)
		}
		err = p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: slice}, &authv1beta1.ResourceSlice{})
		assert.True(t, apierrors.IsNotFound(err), "its slice's copy is gone: %v", err)
		err = c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
		assert.True(t, apierrors.IsNotFound(err), "its Identity is gone: %v", err)
		// The other tenant is untouched.
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(other.id), Name: other.id}, &authv1beta1.Tenant{}))
	})

	t.Run("re-run: nothing to leave", func(t *testing.T) {
		_, errOut := mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave")
		assert.Contains(t, errOut, "No Identity on provider \""+p.id+"\": nothing to leave")
		assert.Contains(t, errOut, "liqoctl unauthenticate --remote-cluster-id "+c.id)
	})
}
