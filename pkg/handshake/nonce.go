package handshake

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// NonceReuseWindow is how young an existing nonce must be for EnsureNonce to hand it out
// again; older ones are replaced, so that a nonce handed out is far from its expiry.
const NonceReuseWindow = 5 * time.Minute

// Nonce is the nonce a provider holds for a consumer.
type Nonce struct {
	Value string
	// Created says EnsureNonce made it now; otherwise it kept a young one.
	Created bool
	// CreatedAt is when its Secret was created: its TTL counts from there.
	CreatedAt time.Time
}

// EnsureNonce makes sure the provider's tenant namespace tn of consumer consumerID holds a
// fresh nonce, and returns it. A young unused nonce is kept (re-running a command changes
// nothing); an old one, or one without the labels of the protocol, is replaced.
func EnsureNonce(ctx context.Context, p *Side, tn, consumerID string, now time.Time) (*Nonce, error) {
	var s corev1.Secret
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s)
	switch {
	case err == nil:
		if nonce, ok := reusableNonce(&s, consumerID, now); ok {
			return &Nonce{Value: nonce, CreatedAt: s.CreationTimestamp.Time}, nil
		}
		if deleteErr := p.Client.Delete(ctx, &s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(deleteErr) != nil {
			return nil, p.Explain(deleteErr, "replacing the old nonce")
		}
	case !apierrors.IsNotFound(err):
		return nil, p.Explain(err, "reading the nonce")
	}
	nonce, err := authn.NewNonce()
	if err != nil {
		return nil, err
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: wire.NonceSecretName, Namespace: tn,
			Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: consumerID},
			Annotations: map[string]string{wire.NonceIssuedAtAnnotation: now.UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{wire.NonceField: []byte(nonce)},
	}
	if err := p.Client.Create(ctx, &s); err != nil {
		return nil, p.Explain(err, "creating the nonce")
	}
	return &Nonce{Value: nonce, Created: true, CreatedAt: s.CreationTimestamp.Time}, nil
}

// reusableNonce returns the nonce of s if it is for consumerID, canonical, not consumed
// by an accepted handshake, and young: its
// Secret, whose creation the provider measures the TTL from, was created less than
// NonceReuseWindow ago.
func reusableNonce(s *corev1.Secret, consumerID string, now time.Time) (string, bool) {
	nonce := string(s.Data[wire.NonceField])
	if s.Labels[wire.NonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != consumerID || authn.CheckNonce(nonce) != nil ||
		s.Annotations[wire.NonceConsumedAtAnnotation] != "" {
		return "", false
	}
	return nonce, now.Sub(s.CreationTimestamp.Time) <= NonceReuseWindow
}

// GetNonce reads the nonce the provider holds for consumerID.
func GetNonce(ctx context.Context, p *Side, consumerID string) (string, time.Time, error) {
	tn, err := p.TenantNamespace(ctx, consumerID)
	if err != nil {
		return "", time.Time{}, p.Explain(err, fmt.Sprintf("looking for the tenant namespace of %q (create it with liqoctl create nonce)", consumerID))
	}
	var s corev1.Secret
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", time.Time{}, fmt.Errorf("%sthere is no nonce for cluster %q in namespace %q: it was never created or was already used by a handshake; run liqoctl create nonce --remote-cluster-id %s", p.prefix(), consumerID, tn, consumerID)
		}
		return "", time.Time{}, p.Explain(err, "reading the nonce")
	}
	nonce := string(s.Data[wire.NonceField])
	if nonce == "" {
		return "", time.Time{}, fmt.Errorf("%sthe nonce for cluster %q is not filled yet: is liqo-auth-manager running?", p.prefix(), consumerID)
	}
	if at := s.Annotations[wire.NonceConsumedAtAnnotation]; at != "" {
		return "", time.Time{}, fmt.Errorf("%sthe nonce for cluster %q was already used by the handshake accepted at %s, and a nonce is single-use: run liqoctl create nonce --remote-cluster-id %s for a new one", p.prefix(), consumerID, at, consumerID)
	}
	return nonce, s.CreationTimestamp.Time, nil
}

// EnsureSignedNonce places nonce in the consumer's signed-nonce Secret of tenant
// namespace tn, for the consumer's controllers to sign, or already signed with sig when
// the caller signed it with the cluster's key (the controllers leave a nonce signed by
// that key alone). A Secret holding another nonce is reset, dropping its stale signature.
func EnsureSignedNonce(ctx context.Context, c *Side, tn, providerID, nonce string, sig []byte) error {
	if err := authn.CheckNonce(nonce); err != nil {
		return fmt.Errorf("the nonce is not valid: %w (copy it exactly as liqoctl get nonce prints it)", err)
	}
	data := map[string][]byte{wire.NonceField: []byte(nonce)}
	if sig != nil {
		data[wire.SignedNonceField] = sig
	}
	var s corev1.Secret
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.SignedNonceSecretName}, &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: wire.SignedNonceSecretName, Namespace: tn,
				Labels: map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: providerID}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		err = c.Client.Create(ctx, &s)
	case err == nil && (string(s.Data[wire.NonceField]) != nonce || s.Labels[wire.SignedNonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != providerID ||
		(sig != nil && !bytes.Equal(s.Data[wire.SignedNonceField], sig))):
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[wire.SignedNonceLabel], s.Labels[wire.RemoteClusterIDLabel] = "true", providerID
		s.Data = data
		err = c.Client.Update(ctx, &s)
	}
	if err != nil {
		return c.Explain(err, "writing the nonce to sign")
	}
	return nil
}

// WaitSignedNonce waits for the consumer's controllers to sign nonce, checks the
// signature with the consumer's public key, and returns it.
func WaitSignedNonce(ctx context.Context, c *Side, tn, nonce string) ([]byte, error) {
	key, err := c.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	var sig []byte
	err = waitFor(ctx, c.Client, client.ObjectKey{Namespace: tn, Name: wire.SignedNonceSecretName}, &corev1.SecretList{}, "the nonce to be signed",
		func(s *corev1.Secret) (bool, string, error) {
			if s == nil {
				return false, "", fmt.Errorf("the signed-nonce Secret in %q was deleted", tn)
			}
			if string(s.Data[wire.NonceField]) != nonce {
				return false, "", fmt.Errorf("the signed-nonce Secret in %q now holds another nonce: is another handshake running?", tn)
			}
			sig = s.Data[wire.SignedNonceField]
			return len(sig) > 0 && authn.VerifyNonceSignature(key.Public(), nonce, sig) == nil, "not signed yet: is liqo-auth-manager (or liqoctl's in-process controllers) running?", nil
		})
	if err != nil {
		return nil, c.Explain(err, "waiting for the signed nonce")
	}
	return sig, nil
}
