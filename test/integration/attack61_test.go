package integration

// Attack 61: the provider CA pinned on first use, in the manual flow.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack61IdentityWriterDecoyPinsItsCA acts as an Identity writer of the consumer's
// tenant namespace (identities create) in the manual flow, where the consumer's
// administrator ran liqoctl generate tenant without --expect-fingerprint: no provider CA
// is pinned until an Identity is accepted, and generate tenant says so. Before the
// provider's Identity comes back, the writer creates a decoy Identity naming the provider,
// with its own CA and API server and a certificate its CA issued to the consumer's name
// for a key of its own (it does not hold the consumer's public key). The identity
// controller refuses the decoy and pins nothing from it; the Identity the provider's
// administrator hands over is then accepted, and its CA pinned. On 1616923 the controller
// pinned the CA of the first Identity it saw, before checking its certificate: the decoy
// chose the CA, and the provider's own Identity was refused (CAFingerprintMismatch).
func TestAttack61IdentityWriterDecoyPinsItsCA(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	startControllers(t, c, authmanager.Consumer)
	C, P := []string{"--kubeconfig", c.cp.Kubeconfig}, []string{"--kubeconfig", p.cp.Kubeconfig}
	mustCLI(t, append([]string{"create", "nonce", "--remote-cluster-id", c.id}, P...)...)
	nonce, _ := mustCLI(t, append([]string{"get", "nonce", "--remote-cluster-id", c.id}, P...)...)
	tenantYAML, errOut := mustCLI(t, append([]string{"generate", "tenant", "--remote-cluster-id", p.id, "--nonce", strings.TrimSpace(nonce)}, C...)...)
	assert.Contains(t, errOut, "No provider CA is pinned", "generate tenant without --expect-fingerprint says the first Identity accepted pins the CA")

	// The writer's decoy, from its own CA.
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "identity-writer", cTN, rule(authv1beta1.GroupVersion.Group, "identities", "create"))
	ca, err := testenv.NewCA("attacker")
	require.NoError(t, err)
	cert, _, err := ca.Issue(c.id, []string{"liqo.io"}, nil, nil)
	require.NoError(t, err)
	decoy := &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.SliceIdentityName("decoy"),
			Labels: map[string]string{wire.RemoteClusterIDLabel: p.id, wire.SliceNameLabel: "decoy"}},
		Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(p.id), Type: authv1beta1.ResourceSliceIdentityType,
			Namespace: ptr.To(wire.TenantNamespaceName(c.id)), AuthParams: authv1beta1.AuthParams{APIServer: "https://apiserver.attacker.example:6443",
				CA: ca.CertPEM, SignedCRT: cert}},
	}
	require.NoError(t, writer.Create(ctx, decoy))
	// The controller decides on the decoy (read by the test, not the writer).
	eventually(t, 30*time.Second, "the decoy decided", func(ctx context.Context) (bool, error) {
		var got authv1beta1.Identity
		if getErr := c.client.Get(ctx, client.ObjectKeyFromObject(decoy), &got); getErr != nil {
			return false, getErr
		}
		return meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady) != nil, nil
	})
	attackerFP, err := authn.CAFingerprint(ca.CertPEM)
	require.NoError(t, err)
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.NotEqual(t, attackerFP, rec.CAFingerprint, "an Identity the controller refused pinned the writer's CA")

	// The administrators go on: the Tenant on the provider, its Identity on the consumer.
	applyYAML(t, p.client, []byte(tenantYAML))
	identityYAML, _ := mustCLI(t, append([]string{"generate", "identity", "--remote-cluster-id", c.id}, P...)...)
	applyYAML(t, c.client, []byte(identityYAML))
	var id authv1beta1.Identity
	eventually(t, 30*time.Second, "the provider's Identity decided", func(ctx context.Context) (bool, error) {
		if getErr := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id); getErr != nil {
			return false, getErr
		}
		return meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady) != nil, nil
	})
	ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status, "the provider's own Identity is refused: %s %s", ready.Reason, ready.Message)
	providerFP, err := authn.CAFingerprint(id.Spec.AuthParams.CA)
	require.NoError(t, err)
	rec, err = cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	assert.Equal(t, providerFP, rec.CAFingerprint, "the record pins another CA than the provider's")
}
