package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAdversarialConsumer hands the consumer forged Identities and signing requests: no
// kubeconfig is written for any of them, and the signer signs nothing but nonces.
func TestAdversarialConsumer(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "advc-consumer", "advc-provider")
	sites := installSites(t, cps, "cl-consumer", "cl-provider")
	c, p := sites[0], sites[1]
	startControllers(t, c, authmanager.Consumer)
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()

	// An honest handshake, so that the Identity spec below starts from a real one.
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	require.Contains(t, errOut, "Identity status is filled")
	cTN := wire.TenantNamespaceName(p.id)
	var real authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &real))
	key, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	foreignCA, err := testenv.NewCA("foreign")
	require.NoError(t, err)
	other := newAttacker(t, "cl-consumer")

	cases := []struct {
		name   string
		reason string
		// ns is the consumer tenant namespace of the provider named by the Identity.
		mutate func(id *authv1beta1.Identity)
	}{
		{"certificate for another key", string(authn.ReasonCertificateKeyMismatch), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.SignedCRT = issueCert(t, p.cp.CA, other.key.Public(), c.id)
		}},
		{"certificate for another cluster", string(authn.ReasonCertificateSubject), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.SignedCRT = issueCert(t, p.cp.CA, key.Public(), "cl-someone-else")
		}},
		{"certificate from a foreign CA", string(authn.ReasonCertificateNotTrusted), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.SignedCRT = issueCert(t, foreignCA, key.Public(), c.id)
		}},
		{"foreign CA presented with its own certificate", string(authn.ReasonCAFingerprintMismatch), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.SignedCRT = issueCert(t, foreignCA, key.Public(), c.id)
			id.Spec.AuthParams.CA = foreignCA.CertPEM
		}},
		{"plain http API server", string(authn.ReasonServerURLInvalid), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.APIServer = "http://evil.example.com"
		}},
		{"garbage certificate", string(authn.ReasonCertificateInvalid), func(id *authv1beta1.Identity) {
			id.Spec.AuthParams.SignedCRT = []byte("garbage")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case replaces the real Identity: its kubeconfig must not change.
			var before corev1.Secret
			require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(real.Name)}, &before))
			id := &authv1beta1.Identity{}
			good := real.Spec.DeepCopy()
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.client.Get(ctx, client.ObjectKeyFromObject(&real), id); err != nil {
					return err
				}
				tc.mutate(id)
				return c.client.Update(ctx, id)
			}))
			expectIdentityRefused(t, c, id, tc.reason)
			var after corev1.Secret
			require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(&before), &after))
			assert.Equal(t, before.Data, after.Data, "a refused Identity writes no kubeconfig")
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.client.Get(ctx, client.ObjectKeyFromObject(&real), id); err != nil {
					return err
				}
				id.Spec = *good
				return c.client.Update(ctx, id)
			}))
		})
	}

	t.Run("kubeconfig Secret of a deleted Identity is adopted, another's is not", func(t *testing.T) {
		key := client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(real.Name)}
		setOwner := func(ref metav1.OwnerReference) {
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var s corev1.Secret
				if err := c.client.Get(ctx, key, &s); err != nil {
					return err
				}
				s.OwnerReferences = []metav1.OwnerReference{ref}
				return c.client.Update(ctx, &s)
			}))
		}
		touch := func() {
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				id := &authv1beta1.Identity{}
				if err := c.client.Get(ctx, client.ObjectKeyFromObject(&real), id); err != nil {
					return err
				}
				// A nudge that changes nothing the controller checks: moving
				// spec.namespace, as this did before the namespace was pinned,
				// is now refused for that alone (TenantNamespaceNotPinned).
				metav1.SetMetaDataAnnotation(&id.ObjectMeta, "test.liqo-auth/touched", time.Now().Format(time.RFC3339Nano))
				return c.client.Update(ctx, id)
			}))
		}
		// A live ConfigMap controls it: refused, left alone.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone", Namespace: cTN}}
		require.NoError(t, c.client.Create(ctx, cm))
		setOwner(metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true)})
		touch()
		expectIdentityRefused(t, c, &real, "KubeconfigSecretNotOwned")
		var kept corev1.Secret
		require.NoError(t, c.client.Get(ctx, key, &kept))
		assert.Equal(t, cm.UID, metav1.GetControllerOf(&kept).UID, "a Secret controlled by something else is not taken over")
		// An earlier Identity of the same name controls it: adopted.
		setOwner(metav1.OwnerReference{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity", Name: real.Name, UID: "deleted-uid", Controller: ptr.To(true)})
		touch()
		eventually(t, 10*time.Second, "the orphaned kubeconfig is adopted", func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			err := c.client.Get(ctx, key, &s)
			owner := metav1.GetControllerOf(&s)
			return owner != nil && owner.UID == real.UID && len(s.OwnerReferences) == 1, err
		})
	})

	t.Run("Identity claiming another provider", func(t *testing.T) {
		id := &authv1beta1.Identity{
			ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName("cl-evil"), Namespace: cTN, Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-evil"}},
			Spec: authv1beta1.IdentitySpec{ClusterID: "cl-evil", Type: authv1beta1.ControlPlaneIdentityType,
				AuthParams: real.Spec.AuthParams, Namespace: ptr.To("x")},
		}
		require.NoError(t, c.client.Create(ctx, id))
		expectIdentityRefused(t, c, id, "IdentityNotInTenantNamespace")
		err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(id.Name)}, &corev1.Secret{})
		assert.True(t, apierrors.IsNotFound(err), "no kubeconfig: %v", err)
	})

	t.Run("the signer is not an oracle", func(t *testing.T) {
		// Not a nonce: never signed.
		require.NoError(t, client.IgnoreNotFound(c.client.Delete(ctx, secret(cTN, wire.SignedNonceSecretName, nil, nil))))
		s := secret(cTN, wire.SignedNonceSecretName, map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: p.id},
			map[string][]byte{wire.NonceField: []byte("transfer 1000 coins to mallory")})
		require.NoError(t, c.client.Create(ctx, s))
		expectSecretEvent(t, c, s, string(authn.ReasonNonceNotCanonical))
		// A nonce, but outside the tenant namespace of the labelled cluster: never signed.
		nonce, _ := authn.NewNonce()
		out := secret("default", wire.SignedNonceSecretName, map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: p.id},
			map[string][]byte{wire.NonceField: []byte(nonce)})
		require.NoError(t, c.client.Create(ctx, out))
		expectSecretEvent(t, c, out, "SignedNonceOutsideTenantNamespace")
		time.Sleep(500 * time.Millisecond)
		for _, obj := range []*corev1.Secret{s, out} {
			require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
			assert.Empty(t, obj.Data[wire.SignedNonceField], "%s/%s must stay unsigned", obj.Namespace, obj.Name)
		}
	})
}

func expectIdentityRefused(t *testing.T, c *site, id *authv1beta1.Identity, reason string) {
	t.Helper()
	eventually(t, 10*time.Second, "the Identity is refused with "+reason, func(ctx context.Context) (bool, error) {
		got := &authv1beta1.Identity{}
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(id), got); err != nil {
			return false, err
		}
		r := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == reason && got.Status.ObservedGeneration == got.Generation, nil
	})
	expectEvent(t, c, id.Namespace, id.Name, reason)
}

func expectSecretEvent(t *testing.T, c *site, s *corev1.Secret, reason string) {
	t.Helper()
	expectEvent(t, c, s.Namespace, s.Name, reason)
}

func expectEvent(t *testing.T, s *site, ns, name, reason string) {
	t.Helper()
	eventually(t, 10*time.Second, "a Warning Event "+reason+" on "+name, func(ctx context.Context) (bool, error) {
		return hasWarning(ctx, s, ns, name, reason)
	})
}

// hasWarning says whether a Warning Event reason about name is in namespace ns of s.
func hasWarning(ctx context.Context, s *site, ns, name, reason string) (bool, error) {
	var evs eventsv1.EventList
	if err := s.client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}
