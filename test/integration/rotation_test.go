package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// rotationSites starts one control plane per id and installs liqo-auth with liqoctl install.
func rotationSites(t *testing.T, ids ...string) []*site {
	t.Helper()
	cps := testenv.New(t, ids...)
	out := make([]*site, len(ids))
	for i, id := range ids {
		mustCLI(t, "install", "--kubeconfig", cps[i].Kubeconfig, "--cluster-id", id)
		out[i] = &site{cp: cps[i], id: id, client: newClient(t, cps[i].Config)}
	}
	return out
}

// keysOf reads a site's KeySet.
func keysOf(t *testing.T, s *site) cluster.KeySet {
	t.Helper()
	ks, err := cluster.GetClusterKeys(context.Background(), s.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	return ks
}

// fingerprintOf is the fingerprint of a public key.
func fingerprintOf(t *testing.T, pub any) string {
	t.Helper()
	fp, err := authn.Fingerprint(pub)
	require.NoError(t, err)
	return fp
}

// getsOwnTenant says whether kubeconfig, an identity of consumer with a provider, may read
// its own Tenant there (the error when it may not).
func getsOwnTenant(t *testing.T, consumer *site, kubeconfig []byte) error {
	t.Helper()
	c := newClient(t, restConfigFromKubeconfig(t, kubeconfig))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &authv1beta1.Tenant{})
}

// requireMovedTo checks that the consumer's Identity with each provider holds a
// certificate for its current key, key-bound, and that its kubeconfig works.
func requireMovedTo(t *testing.T, consumer *site, providers ...*site) {
	t.Helper()
	ks := keysOf(t, consumer)
	for _, p := range providers {
		var id authv1beta1.Identity
		require.NoError(t, consumer.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id))
		cert, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
		require.NoError(t, err)
		assert.True(t, authn.PublicKeysEqual(cert.PublicKey, ks.Current.Public()), "the Identity with %s holds a certificate for the current key", p.id)
		group, err := authn.KeyGroup(consumer.id, ks.Current.Public())
		require.NoError(t, err)
		assert.Equal(t, group, authn.CertificateKeyGroup(cert), "the certificate with %s is key-bound", p.id)
		require.NoError(t, getsOwnTenant(t, consumer, kubeconfigOf(t, consumer, p)), "the new identity works with %s", p.id)
	}
}

// peerAll authenticates consumer with each provider (their managers run) and returns each
// identity's kubeconfig, each checked to work.
func peerAll(t *testing.T, consumer *site, providers ...*site) map[string][]byte {
	t.Helper()
	old := map[string][]byte{}
	for _, p := range providers {
		mustCLI(t, pairArgs("authenticate", consumer, p)...)
		old[p.id] = kubeconfigOf(t, consumer, p)
		require.NoError(t, getsOwnTenant(t, consumer, old[p.id]), "the peering with %s works before the rotation", p.id)
	}
	return old
}

// requireOldForbidden checks that each saved (old-key) kubeconfig gets 403 Forbidden.
func requireOldForbidden(t *testing.T, consumer *site, old map[string][]byte, providers ...*site) {
	t.Helper()
	for _, p := range providers {
		err := getsOwnTenant(t, consumer, old[p.id])
		assert.True(t, apierrors.IsForbidden(err), "the old certificate is forbidden on %s: %v", p.id, err)
	}
}

func TestRotateKeyConsumerThreeProviders(t *testing.T) {
	t.Parallel()
	sites := rotationSites(t, "cl-consumer", "cl-p1", "cl-p2", "cl-p3")
	consumer, providers := sites[0], sites[1:]
	for _, p := range providers {
		startManager(t, p, "--consumer=false")
	}
	startManager(t, consumer)
	old := peerAll(t, consumer, providers...)
	before := keysOf(t, consumer)
	oldFP := fingerprintOf(t, before.Current.Public())

	_, errOut := mustCLI(t, "rotate", "key", "--kubeconfig", consumer.cp.Kubeconfig)
	t.Log(errOut)
	assert.Contains(t, errOut, "The key is rotated")

	after := keysOf(t, consumer)
	assert.NotEqual(t, oldFP, fingerprintOf(t, after.Current.Public()), "the current key changed")
	assert.Nil(t, after.Next, "no next key left")
	assert.Nil(t, after.Previous, "no previous key left")
	requireMovedTo(t, consumer, providers...)
	requireOldForbidden(t, consumer, old, providers...)
}

func TestRotateKeyResumes(t *testing.T) {
	t.Parallel()
	sites := rotationSites(t, "cl-consumer", "cl-p1", "cl-p2")
	consumer, providers := sites[0], sites[1:]
	for _, p := range providers {
		startManager(t, p, "--consumer=false")
	}
	m := startManager(t, consumer)
	old := peerAll(t, consumer, providers...)
	oldFP := fingerprintOf(t, keysOf(t, consumer).Current.Public())

	mustCLI(t, "rotate", "key", "--no-wait", "--kubeconfig", consumer.cp.Kubeconfig)
	// Stop the consumer's manager as soon as one provider moved (a record of the move).
	eventually(t, 2*time.Minute, "a provider moved", func(ctx context.Context) (bool, error) {
		for _, p := range providers {
			rec, err := cluster.GetTenantRecord(ctx, consumer.client, wire.DefaultLiqoNamespace, p.id)
			if err != nil {
				return false, err
			}
			if rec.KeyMove != nil {
				return true, nil
			}
		}
		return false, nil
	})
	m.Stop()
	ks := keysOf(t, consumer)
	require.True(t, ks.Rotating(), "interrupted in the middle")
	// In the middle, every peering works (each Identity's kubeconfig, whichever key it holds).
	for _, p := range providers {
		eventuallyNoError(t, context.Background(), fmt.Sprintf("the peering with %s works in the middle", p.id), func(context.Context) error {
			return getsOwnTenant(t, consumer, kubeconfigOf(t, consumer, p))
		})
	}

	startManager(t, consumer)
	_, errOut := mustCLI(t, "rotate", "key", "--kubeconfig", consumer.cp.Kubeconfig)
	t.Log(errOut)
	after := keysOf(t, consumer)
	assert.NotEqual(t, oldFP, fingerprintOf(t, after.Current.Public()))
	assert.False(t, after.Rotating(), "converged: no next or previous key")
	requireMovedTo(t, consumer, providers...)
	requireOldForbidden(t, consumer, old, providers...)
}

func TestRotateKeyProviderGone(t *testing.T) {
	t.Parallel()
	sites := rotationSites(t, "cl-consumer", "cl-p1", "cl-p2")
	consumer, up, gone := sites[0], sites[1], sites[2]
	startManager(t, up, "--consumer=false")
	mg := startManager(t, gone, "--consumer=false")
	old := peerAll(t, consumer, up, gone)
	mg.Stop()
	gone.cp.StopAPIServer()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, errOut, err := runCLIContext(ctx, "rotate", "key", "--kubeconfig", consumer.cp.Kubeconfig)
	t.Log(errOut)
	require.Error(t, err, "the rotation cannot end while a provider is gone")
	assert.Contains(t, errOut, "Provider cl-p2: CannotMove")
	assert.Contains(t, errOut, "make "+gone.cp.URL+" reachable")
	assert.Contains(t, err.Error(), "provider(s) cl-p2 cannot move", "the command ends naming it")

	ks := keysOf(t, consumer)
	assert.NotNil(t, ks.Previous, "the old key is not retired")
	require.NoError(t, getsOwnTenant(t, consumer, kubeconfigOf(t, consumer, up)))
	var id authv1beta1.Identity
	require.NoError(t, consumer.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(up.id), Name: wire.IdentityName(up.id)}, &id))
	cert, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
	require.NoError(t, err)
	assert.True(t, authn.PublicKeysEqual(cert.PublicKey, ks.Current.Public()), "the reachable provider moved")
	requireOldForbidden(t, consumer, old, up)
}

func TestRotateKeyProviderThreeConsumers(t *testing.T) {
	t.Parallel()
	sites := rotationSites(t, "cl-provider", "cl-c1", "cl-c2", "cl-c3")
	provider, consumers := sites[0], sites[1:]
	startManager(t, provider, "--consumer=false")
	for _, c := range consumers {
		startManager(t, c, "--provider=false")
		mustCLI(t, pairArgs("authenticate", c, provider)...)
	}
	oldFP := fingerprintOf(t, keysOf(t, provider).Current.Public())

	_, errOut := mustCLI(t, "rotate", "key", "--kubeconfig", provider.cp.Kubeconfig)
	t.Log(errOut)
	ks := keysOf(t, provider)
	assert.NotEqual(t, oldFP, fingerprintOf(t, ks.Current.Public()))
	assert.False(t, ks.Rotating(), "the old key is retired")
	var ts authv1beta1.TenantList
	require.NoError(t, provider.client.List(context.Background(), &ts))
	require.Len(t, ts.Items, len(consumers))
	for i := range ts.Items {
		assert.NoError(t, acceptance.VerifySealed(&ts.Items[i], ks.Current.Public()), "Tenant %s re-sealed with the new key", ts.Items[i].Namespace)
	}
	for _, c := range consumers {
		require.NoError(t, getsOwnTenant(t, c, kubeconfigOf(t, c, provider)), "the peering of %s works", c.id)
	}
	// A new handshake under the provider's new key works.
	c := consumers[0]
	mustCLI(t, pairArgs("unauthenticate", c, provider)...)
	mustCLI(t, pairArgs("authenticate", c, provider)...)
	require.NoError(t, getsOwnTenant(t, c, kubeconfigOf(t, c, provider)), "a new handshake of %s works", c.id)
}
