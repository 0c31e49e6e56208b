package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/peering"
)

// declaredPeering is the Peering and its bootstrap Secret, as a GitOps tool applies them.
func declaredPeering(name, secret string, kubeconfig []byte, providerID string) (*authv1beta1.Peering, *corev1.Secret) {
	p := &authv1beta1.Peering{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: name},
		Spec: authv1beta1.PeeringSpec{BootstrapSecretRef: corev1.LocalObjectReference{Name: secret}}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: secret,
		Labels: map[string]string{wire.RemoteClusterIDLabel: providerID}},
		Data: map[string][]byte{peering.KubeconfigKey: kubeconfig}}
	return p, s
}

// waitPeering waits until the Peering's Ready condition has reason, and returns it.
func waitPeering(t *testing.T, c client.Client, name, reason string, timeout time.Duration) *authv1beta1.Peering {
	t.Helper()
	p := &authv1beta1.Peering{}
	eventually(t, timeout, "Peering "+name+" reaches reason "+reason, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: name}, p); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, authv1beta1.ConditionReady)
		if cond == nil {
			return false, nil
		}
		if cond.Reason != reason {
			return false, fmt.Errorf("state %s, reason %s: %s", p.Status.State, cond.Reason, cond.Message)
		}
		return true, nil
	})
	return p
}


// peeringEvents are the notes of the Events recorded on Peering name.
func peeringEvents(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, c.List(context.Background(), &list, client.InNamespace(wire.DefaultLiqoNamespace)))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Peering" && e.Regarding.Name == name {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestDeclarativePeering: the consumer's administrator declares a peering with kubectl
// apply alone (a Peering, then its bootstrap Secret, in the wrong order on purpose), with
// a manager on each side; the consumer's manager carries out the handshake, reports each
// step, and the identity works. Re-applying the consumed Secret changes nothing; deleting
// the Peering leaves the provider, proven.
func TestDeclarativePeering(t *testing.T) {
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()

	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("to-provider", "provider-bootstrap", []byte(kubeconfig), p.id)

	require.NoError(t, c.client.Create(ctx, pe), "the Peering first")
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonBootstrapSecretMissing, 20*time.Second)
	require.NoError(t, c.client.Create(ctx, s), "its Secret after it")
	got := waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
	assert.Equal(t, authv1beta1.PeeringPeered, got.Status.State)
	assert.Equal(t, authv1beta1.ClusterID(p.id), got.Status.ProviderClusterID)
	require.NotNil(t, got.Status.Certificate)
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	notes := strings.Join(peeringEvents(t, c.client, pe.Name), "\n")
	for _, step := range []string{"(remote) Nonce generated successfully", "(local) Nonce is signed", "(remote) Tenant status is filled", "(local) Identity status is filled"} {
		assert.Contains(t, notes, step, "each step of the handshake is an Event on the Peering")
	}

	t.Run("re-applying the consumed Secret runs no handshake", func(t *testing.T) {
		var before authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &before))
		var cur corev1.Secret
		require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(s), &cur))
		cur.Annotations = map[string]string{"argocd.argoproj.io/sync": time.Now().String()}
		require.NoError(t, c.client.Update(ctx, &cur))
		time.Sleep(2 * time.Second)
		var after authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(&before), &after))
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the provider's Tenant is untouched")
		waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 5*time.Second)
	})

	t.Run("deleting the Peering leaves the provider", func(t *testing.T) {
		require.NoError(t, c.client.Delete(ctx, pe))
		eventually(t, 30*time.Second, "the Peering is gone", func(ctx context.Context) (bool, error) {
			err := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &authv1beta1.Peering{})
			return apierrors.IsNotFound(err), err
		})
		err := p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
		assert.True(t, apierrors.IsNotFound(err), "the Tenant is gone on the provider: %v", err)
		err = c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
		assert.True(t, apierrors.IsNotFound(err), "the Identity is gone on the consumer: %v", err)
	})
}
