package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestAttack54FullSecretQuotaKeepsTheSignedNonce (helper-12's review of 7042a8e):
// EnsureSignedNonce creates the consumer's signed-nonce Secret first, unread, and reads it
// on AlreadyExists. The API server runs validating admission, and so ResourceQuota, before
// it looks whether the name is taken: in a tenant namespace whose Secret quota is full, the
// create is refused as exceeded quota (403), not AlreadyExists. The first version returned
// that refusal and never reset the Secret that was there, where reading it first and
// updating it in place (which no object-count quota refuses) had worked.
//
// The attack step is made by a principal weaker than a Secret writer: one that may only
// create Secrets in the consumer's tenant namespace (no get, update or delete: it cannot
// touch liqo-signed-nonce itself). It fills the quota the administrator set; the
// administrator's next liqoctl generate tenant (through the same EnsureSignedNonce as
// liqoctl authenticate's exchange and the Peering controller's) must still place the new
// nonce.
func TestAttack54FullSecretQuotaKeepsTheSignedNonce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := testenv.New(t, "attack54-consumer")[0]
	mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", "cl-consumer")
	c := &site{cp: cp, id: "cl-consumer", client: newClient(t, cp.Config)}
	const providerID = "cl-provider"
	tn := wire.TenantNamespaceName(providerID)
	generate := func(nonce string) (string, error) {
		_, errOut, err := runCLI(t, "generate", "tenant", "--kubeconfig", cp.Kubeconfig, "--remote-cluster-id", providerID, "--nonce", nonce)
		return errOut, err
	}
	newNonce := func() string {
		n, err := authn.NewNonce()
		require.NoError(t, err)
		return n
	}
	signedNonce := func() *corev1.Secret {
		var s corev1.Secret
		require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.SignedNonceSecretName}, &s))
		return &s
	}

	// An earlier handshake's step: the signed-nonce Secret is there, as a handshake leaves it.
	first := newNonce()
	errOut, err := generate(first)
	require.NoError(t, err, "the first generate tenant:\n%s", errOut)
	require.Equal(t, first, string(signedNonce().Data[wire.NonceField]))

	// Setup, as the administrator: a Secret quota in the tenant namespace with room for two
	// more.
	sq := newSecretQuota(t, c, tn, 2)

	// Observation (not asserted): a re-run that finds the Secret as it wants it still sends
	// a create, which quota admission charges before the storage answers AlreadyExists; a
	// resourcequota controller gives the charge back only at its next full resync.
	before := sq.used()
	errOut, err = generate(first)
	require.NoError(t, err, "a re-run of generate tenant with room in the quota:\n%s", errOut)
	t.Logf("quota used by Secrets in %s: %d before a re-run that changed no Secret, %d after", tn, before, sq.used())

	// The attack: a principal that may only create Secrets in the tenant namespace fills
	// the quota. It never reads, writes or deletes liqo-signed-nonce.
	w := principal(t, c, "secret-creator", tn, rule("", "secrets", "create"))
	fillSecretQuota(t, w, tn)
	err = w.List(ctx, &corev1.SecretList{}, client.InNamespace(tn))
	require.True(t, apierrors.IsForbidden(err), "the attacker may not even read Secrets: %v", err)

	// The administrator's next handshake step with the provider's next nonce: the Secret is
	// there, and replacing its nonce changes no object count.
	second := newNonce()
	errOut, err = generate(second)
	require.NoError(t, err, "liqoctl generate tenant with a new nonce, the signed-nonce Secret being there and the Secret quota full (filled by a principal that may only create Secrets):\n%s", errOut)
	s := signedNonce()
	require.Equal(t, second, string(s.Data[wire.NonceField]), "the signed-nonce Secret holds the new nonce")
}
