package cluster

import (
	"context"
	"crypto"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// GetClusterKey reads the cluster key pair from the authentication-keys Secret and checks
// that its public half matches the private key.
func GetClusterKey(ctx context.Context, c client.Reader, ns string) (crypto.Signer, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s/%s not found", ErrNotInstalled, ns, wire.KeysSecretName)
		}
		return nil, fmt.Errorf("reading the cluster key: %w", err)
	}
	if len(s.Data[wire.PrivateKeyField]) == 0 && len(s.Data[wire.PublicKeyField]) == 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s holds no key yet (liqo-auth-manager fills it at its first start)", ErrNotInstalled, ns, wire.KeysSecretName)
	}
	return keyFromSecret(&s)
}

func keyFromSecret(s *corev1.Secret) (crypto.Signer, error) {
	key, err := authn.ParsePrivateKey(s.Data[wire.PrivateKeyField])
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", s.Namespace, s.Name, err) //nolint:staticcheck // ST1005: Secret is the kind's name
	}
	if pub := s.Data[wire.PublicKeyField]; len(pub) > 0 {
		stored, err := authn.ParsePublicKey(pub)
		if err != nil || !authn.PublicKeysEqual(stored, key.Public()) {
			return nil, fmt.Errorf("Secret %s/%s: the public key does not match the private key", s.Namespace, s.Name) //nolint:staticcheck // ST1005: Secret is the kind's name
		}
	}
	return key, nil
}

// EnsureClusterKey returns the cluster key, creating it with the given algorithm when
// missing. An existing key is never replaced, even if it is of another algorithm or
// broken: a broken key is an error for an administrator to look at.
func EnsureClusterKey(ctx context.Context, c client.Client, ns string, alg authn.Algorithm) (key crypto.Signer, created bool, err error) {
	key, err = GetClusterKey(ctx, c, ns)
	if err == nil || !isNotInstalled(err) {
		return key, false, err
	}
	key, err = authn.GenerateKey(alg)
	if err != nil {
		return nil, false, err
	}
	priv, err := authn.MarshalPrivateKey(key)
	if err != nil {
		return nil, false, err
	}
	pub, err := authn.MarshalPublicKey(key.Public())
	if err != nil {
		return nil, false, err
	}
	s := ForgeKeysSecret(ns)
	s.Data = map[string][]byte{wire.PrivateKeyField: priv, wire.PublicKeyField: pub}
	var empty corev1.Secret
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &empty); err == nil {
		// An empty Secret, as a manifest applied by GitOps leaves it: fill it (an update
		// that loses a race to another filler is a conflict: theirs wins).
		empty.Data = s.Data
		if err := c.Update(ctx, &empty); err != nil {
			if apierrors.IsConflict(err) {
				key, err = GetClusterKey(ctx, c, ns)
				return key, false, err
			}
			return nil, false, fmt.Errorf("writing the cluster key: %w", err)
		}
		return key, true, nil
	}
	if err := c.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Someone else created it first: theirs wins.
			key, err = GetClusterKey(ctx, c, ns)
			return key, false, err
		}
		return nil, false, fmt.Errorf("creating the cluster key: %w", err)
	}
	return key, true, nil
}

// ForgeKeysSecret is the authentication-keys Secret of namespace ns, without the keys:
// liqo-auth-manager fills it at its first start (private keys do not belong in manifests).
func ForgeKeysSecret(ns string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: wire.KeysSecretName, Namespace: ns, Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue}},
		Type:       corev1.SecretTypeOpaque,
	}
}
