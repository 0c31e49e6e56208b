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

// KeySet is a cluster's keys: the current one (what new handshakes, nonce signatures and
// acceptance seals use) and, around a rotation, the staged next one and the previous one
// that is kept until every peer has moved away from it.
type KeySet struct {
	Current, Next, Previous crypto.Signer
}

// All is every key of the set, current first, then next, then previous.
func (k KeySet) All() []crypto.Signer {
	var out []crypto.Signer
	for _, s := range []crypto.Signer{k.Current, k.Next, k.Previous} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Holding is the key of the set whose public half is pub, or nil.
func (k KeySet) Holding(pub crypto.PublicKey) crypto.Signer {
	for _, s := range k.All() {
		if authn.PublicKeysEqual(s.Public(), pub) {
			return s
		}
	}
	return nil
}

// Rotating says whether a rotation is under way: a key is staged or one is not retired.
func (k KeySet) Rotating() bool { return k.Next != nil || k.Previous != nil }

// GetClusterKeys reads every key of the authentication-keys Secret, each checked against
// its public half.
func GetClusterKeys(ctx context.Context, c client.Reader, ns string) (KeySet, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return KeySet{}, fmt.Errorf("%w: Secret %s/%s not found", ErrNotInstalled, ns, wire.KeysSecretName)
		}
		return KeySet{}, fmt.Errorf("reading the cluster key: %w", err)
	}
	return KeySetFromSecret(&s)
}

// KeySetFromSecret is the key set authentication-keys Secret s holds, each key checked
// against its public half, for a caller that read the Secret already.
func KeySetFromSecret(s *corev1.Secret) (KeySet, error) {
	if len(s.Data[wire.PrivateKeyField]) == 0 && len(s.Data[wire.PublicKeyField]) == 0 {
		return KeySet{}, fmt.Errorf("%w: Secret %s/%s holds no key yet (liqo-auth-manager fills it at its first start)", ErrNotInstalled, s.Namespace, s.Name)
	}
	var ks KeySet
	var err error
	if ks.Current, err = keyFromSecret(s); err != nil {
		return KeySet{}, err
	}
	if ks.Next, err = optionalKey(s, wire.NextPrivateKeyField, wire.NextPublicKeyField); err != nil {
		return KeySet{}, err
	}
	if ks.Previous, err = optionalKey(s, wire.PreviousPrivateKeyField, wire.PreviousPublicKeyField); err != nil {
		return KeySet{}, err
	}
	return ks, nil
}

// optionalKey reads the key pair in fields privField and pubField of s, nil when both are
// empty.
func optionalKey(s *corev1.Secret, privField, pubField string) (crypto.Signer, error) {
	priv, pub := s.Data[privField], s.Data[pubField]
	if len(priv) == 0 && len(pub) == 0 {
		return nil, nil
	}
	key, err := authn.ParsePrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s, field %s: %w", s.Namespace, s.Name, privField, err) //nolint:staticcheck // ST1005: Secret is the kind's name
	}
	stored, err := authn.ParsePublicKey(pub)
	if err != nil || !authn.PublicKeysEqual(stored, key.Public()) {
		return nil, fmt.Errorf("Secret %s/%s: field %s does not match field %s", s.Namespace, s.Name, pubField, privField) //nolint:staticcheck // ST1005: Secret is the kind's name
	}
	return key, nil
}

// setKey writes key (nil: removes it) into fields privField and pubField of s.
func setKey(s *corev1.Secret, key crypto.Signer, privField, pubField string) error {
	if key == nil {
		delete(s.Data, privField)
		delete(s.Data, pubField)
		return nil
	}
	priv, err := authn.MarshalPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := authn.MarshalPublicKey(key.Public())
	if err != nil {
		return err
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[privField], s.Data[pubField] = priv, pub
	return nil
}

// updateKeys reads the authentication-keys Secret, lets change turn its key set into the
// next one (false: nothing to write), and writes it back with the resourceVersion read
// (a concurrent writer makes it fail with a conflict: the caller retries from a fresh
// read). It returns the key set as written.
func updateKeys(ctx context.Context, c client.Client, ns string, change func(*KeySet) (bool, error)) (KeySet, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &s); err != nil {
		return KeySet{}, fmt.Errorf("reading the cluster key: %w", err)
	}
	ks, err := KeySetFromSecret(&s)
	if err != nil {
		return KeySet{}, err
	}
	write, err := change(&ks)
	if err != nil || !write {
		return ks, err
	}
	for _, f := range []struct {
		key       crypto.Signer
		priv, pub string
	}{{ks.Current, wire.PrivateKeyField, wire.PublicKeyField}, {ks.Next, wire.NextPrivateKeyField, wire.NextPublicKeyField},
		{ks.Previous, wire.PreviousPrivateKeyField, wire.PreviousPublicKeyField}} {
		if err := setKey(&s, f.key, f.priv, f.pub); err != nil {
			return KeySet{}, err
		}
	}
	if err := c.Update(ctx, &s); err != nil {
		return KeySet{}, fmt.Errorf("writing the cluster keys: %w", err)
	}
	return ks, nil
}

// StageNextKey stages a new key of algorithm alg beside the current one, the first step of
// a rotation. A key already staged is kept (a rotation interrupted and asked again
// resumes). It refuses while the key of an earlier rotation is not retired.
func StageNextKey(ctx context.Context, c client.Client, ns string, alg authn.Algorithm) (KeySet, error) {
	return updateKeys(ctx, c, ns, func(ks *KeySet) (bool, error) {
		if ks.Next != nil {
			return false, nil
		}
		if ks.Previous != nil {
			return false, fmt.Errorf("%w: the key of the previous rotation is not retired yet", ErrRotationUnfinished)
		}
		next, err := authn.GenerateKey(alg)
		if err != nil {
			return false, err
		}
		ks.Next = next
		return true, nil
	})
}

// SwitchToNextKey makes the staged key the current one and keeps the current one as the
// previous key, until RetirePreviousKey. Without a staged key it changes nothing.
func SwitchToNextKey(ctx context.Context, c client.Client, ns string) (KeySet, error) {
	return updateKeys(ctx, c, ns, func(ks *KeySet) (bool, error) {
		if ks.Next == nil {
			return false, nil
		}
		if ks.Previous != nil {
			return false, fmt.Errorf("%w: the key of the previous rotation is not retired yet", ErrRotationUnfinished)
		}
		ks.Previous, ks.Current, ks.Next = ks.Current, ks.Next, nil
		return true, nil
	})
}

// RetirePreviousKey removes the previous key, the last step of a rotation: the caller has
// proven that no peer relies on it any more.
func RetirePreviousKey(ctx context.Context, c client.Client, ns string) (KeySet, error) {
	return updateKeys(ctx, c, ns, func(ks *KeySet) (bool, error) {
		if ks.Previous == nil {
			return false, nil
		}
		ks.Previous = nil
		return true, nil
	})
}

// KeySource gives a controller the cluster's keys as they are now: a rotation changes them
// while the controllers run.
type KeySource interface {
	Keys(ctx context.Context) (KeySet, error)
}

// SecretKeys is the KeySource of the authentication-keys Secret in Namespace, read through
// Reader (a manager's cache, whose Secrets are watched, or a live client).
type SecretKeys struct {
	Reader    client.Reader
	Namespace string
}

// Keys reads the key set.
func (s SecretKeys) Keys(ctx context.Context) (KeySet, error) {
	return GetClusterKeys(ctx, s.Reader, s.Namespace)
}

// FixedKeys is a KeySource that never changes (tests, and one command's in-process
// controllers, which a rotation does not run beside).
type FixedKeys KeySet

// Keys returns the set.
func (f FixedKeys) Keys(context.Context) (KeySet, error) { return KeySet(f), nil }
