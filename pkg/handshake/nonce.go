package handshake

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
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
// nothing); an old one, one a handshake consumed (as this cluster's tenant record says),
// or one without the labels of the protocol, is replaced. The nonce is created first: in
// the usual case (a tenant namespace made a moment ago, or a nonce deleted by
// unauthenticate) there is none to read. A create refused for another reason than the
// name being taken (a full Secret quota, checked before the name) still hands out a young
// nonce that is there (TestAttack56FullSecretQuotaKeepsTheNonce); an old one is then kept
// and the refusal returned: deleting it would free a place in the quota for whoever may
// create Secrets there.
func EnsureNonce(ctx context.Context, p *Side, tn, consumerID string, now time.Time) (*Nonce, error) {
	nonce, err := authn.NewNonce()
	if err != nil {
		return nil, err
	}
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: wire.NonceSecretName, Namespace: tn,
			Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: consumerID},
			Annotations: map[string]string{wire.NonceIssuedAtAnnotation: now.UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{wire.NonceField: []byte(nonce)},
	}
	created := s.DeepCopy()
	createErr := p.Client.Create(ctx, created)
	if createErr == nil {
		return &Nonce{Value: nonce, Created: true, CreatedAt: created.CreationTimestamp.Time}, nil
	}
	var old corev1.Secret
	err = p.Client.Get(ctx, client.ObjectKeyFromObject(&s), &old)
	switch {
	case err == nil:
	case !apierrors.IsAlreadyExists(createErr):
		// Refused for another reason than the name (a full Secret quota, which admission
		// checks before the name), with no nonce there to keep, or none that may be read.
		return nil, p.Explain(createErr, "creating the nonce")
	case !apierrors.IsNotFound(err):
		return nil, p.Explain(err, "reading the nonce")
	}
	if err == nil {
		if string(old.Data[wire.NonceField]) == nonce {
			// This run's own create, stored though its answer was lost (a timeout).
			return &Nonce{Value: nonce, Created: true, CreatedAt: old.CreationTimestamp.Time}, nil
		}
		reusable, err := reusableNonce(ctx, p, &old, consumerID, now)
		if err != nil {
			return nil, err
		}
		if reusable != "" {
			return &Nonce{Value: reusable, CreatedAt: old.CreationTimestamp.Time}, nil
		}
		if !apierrors.IsAlreadyExists(createErr) {
			// No room for its successor: the old one stays until there is, rather than leave
			// a free place in the quota to whoever may create Secrets here, whose own nonce
			// the next run would find young and hand out
			// (TestAttack57CreateOnlyPrincipalClaimsTheFreedNonceSlot).
			return nil, p.Explain(createErr, "replacing the old nonce")
		}
		if deleteErr := p.Client.Delete(ctx, &old, client.Preconditions{UID: &old.UID}); apierrors.IsConflict(deleteErr) {
			return nil, raced(p, tn)
		} else if client.IgnoreNotFound(deleteErr) != nil {
			return nil, p.Explain(deleteErr, "replacing the old nonce")
		}
	}
	if err := createReplacement(ctx, p, &s); apierrors.IsAlreadyExists(err) {
		return nil, raced(p, tn)
	} else if err != nil {
		return nil, p.Explain(err, "creating the nonce")
	}
	return &Nonce{Value: nonce, Created: true, CreatedAt: s.CreationTimestamp.Time}, nil
}

// createReplacement creates the nonce Secret s, once the first create was refused as
// the name was taken and the Secret there deleted (by this run, or by someone else since).
// That first create was still charged to the Secret quota: until the resourcequota
// controller counts again (on the deletion's event, usually within a second) a full quota
// refuses this one, which is tried again for up to about 3 s. Until it lands the place is
// free to whoever may create Secrets here: returning would leave it free until the
// command is run again.
func createReplacement(ctx context.Context, p *Side, s *corev1.Secret) error {
	charged := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Steps: 8}
	return retry.OnError(charged, IsQuotaExceeded, func() error { return p.Client.Create(ctx, s) })
}

// raced is the error of an EnsureNonce that found the nonce Secret of tn replaced by
// someone else while it replaced it.
func raced(p *Side, tn string) error {
	return fmt.Errorf("%sthe nonce Secret %s/%s was written by someone else while it was being replaced: run the command again; if this keeps happening, find who else writes Secrets in namespace %s", p.prefix(), tn, wire.NonceSecretName, tn)
}

// reusableNonce returns the nonce of s if it is for consumerID, canonical, young (its
// Secret, whose creation the provider measures the TTL from, was created less than
// NonceReuseWindow ago) and not consumed by a handshake, as this cluster's tenant record
// says (read only then); "" otherwise.
func reusableNonce(ctx context.Context, p *Side, s *corev1.Secret, consumerID string, now time.Time) (string, error) {
	nonce := string(s.Data[wire.NonceField])
	canonical := authn.CheckNonce(nonce) == nil
	if s.Labels[wire.NonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != consumerID || !canonical ||
		now.Sub(s.CreationTimestamp.Time) > NonceReuseWindow {
		return "", nil
	}
	rec, known, err := nonceRecord(ctx, p, consumerID)
	switch {
	case err != nil:
		return "", err
	case !known, rec.NonceUsed(nonce, string(s.UID)):
		return "", nil // unknown: replaced, as a consumed one would be
	}
	return nonce, nil
}

// nonceRecord reads this cluster's tenant record of consumerID, which alone says whether a
// nonce was consumed: rec is nil when there is none, or on a provider run by Liqo's
// controllers, which keep none (and never consume a nonce); known is false when these
// credentials may not read it (a peering user made before it could), and nobody can tell.
func nonceRecord(ctx context.Context, p *Side, consumerID string) (rec *cluster.TenantRecord, known bool, err error) {
	if p.Controllers().Liqo() {
		return nil, true, nil
	}
	rec, err = cluster.GetTenantRecord(ctx, p.Client, p.Namespace, consumerID)
	switch {
	case apierrors.IsForbidden(err):
		return nil, false, nil
	case err != nil:
		return nil, false, p.Explain(err, "reading the tenant record")
	}
	return rec, true, nil
}

// GetNonce reads the nonce the provider holds for consumerID.
func GetNonce(ctx context.Context, p *Side, consumerID string) (string, time.Time, error) {
	tn, err := p.TenantNamespace(ctx, consumerID)
	if err != nil {
		return "", time.Time{}, p.Explain(err, fmt.Sprintf("looking for the tenant namespace of %q (create it with liqoctl create nonce)", consumerID))
	}
	var s corev1.Secret
	if getErr := p.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s); getErr != nil {
		if apierrors.IsNotFound(getErr) {
			return "", time.Time{}, fmt.Errorf("%sthere is no nonce for cluster %q in namespace %q: it was never created or was already used by a handshake; run liqoctl create nonce --remote-cluster-id %s", p.prefix(), consumerID, tn, consumerID)
		}
		return "", time.Time{}, p.Explain(getErr, "reading the nonce")
	}
	nonce := string(s.Data[wire.NonceField])
	if nonce == "" {
		return "", time.Time{}, fmt.Errorf("%sthe nonce for cluster %q is not filled yet: is liqo-auth-manager running?", p.prefix(), consumerID)
	}
	rec, known, err := nonceRecord(ctx, p, consumerID)
	switch {
	case err != nil:
		return "", time.Time{}, err
	case !known && p.Report != nil:
		p.Report.Warn("These credentials may not read the tenant record of %q, which alone says whether a handshake already used this nonce: if the provider refuses it (NonceConsumed), run liqoctl create nonce --remote-cluster-id %s, which replaces a nonce it cannot vouch for", consumerID, consumerID)
	case rec.NonceUsed(nonce, string(s.UID)):
		return "", time.Time{}, fmt.Errorf("%sthe nonce for cluster %q was already used by the handshake accepted at %s, and a nonce is single-use: run liqoctl create nonce --remote-cluster-id %s for a new one", p.prefix(), consumerID, rec.ConsumedNonce.At.UTC().Format(time.RFC3339), consumerID)
	}
	return nonce, s.CreationTimestamp.Time, nil
}

// EnsureSignedNonce places nonce in the consumer's signed-nonce Secret of tenant
// namespace tn, for the consumer's controllers to sign, or already signed with sig when
// the caller signed it with the cluster's key (the controllers leave a nonce signed by
// that key alone). A Secret holding another nonce is reset, dropping its stale signature.
// The consumer's controllers may write the Secret meanwhile (re-signing the nonce it held
// with a rotated key), and another handshake may create it first: such a conflict is read
// again and retried (another handshake then finds its nonce replaced, WaitSignedNonce).
func EnsureSignedNonce(ctx context.Context, c *Side, tn, providerID, nonce string, sig []byte) error {
	if err := authn.CheckNonce(nonce); err != nil {
		return fmt.Errorf("the nonce is not valid: %w (copy it exactly as liqoctl get nonce prints it)", err)
	}
	raced := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	if err := retry.OnError(retry.DefaultRetry, raced, func() error {
		return writeSignedNonce(ctx, c, tn, providerID, nonce, sig)
	}); err != nil {
		return c.Explain(err, "writing the nonce to sign")
	}
	return nil
}

// writeSignedNonce is one try of EnsureSignedNonce: create the Secret, or, when it exists,
// reset it unless it already holds nonce (and sig) under the right labels. It is created
// first, unread: in the usual case (a tenant namespace made a moment ago, or a signed
// nonce deleted by unauthenticate) there is none to read. A create refused for another
// reason than the name being taken (a full Secret quota: the API server admits a create
// before it looks at the name, and anyone who may create Secrets there can fill it) still
// resets the Secret that is there, as an update, which no object-count quota refuses
// (TestAttack54FullSecretQuotaKeepsTheSignedNonce); the create's error is returned only
// when there is none. A Secret deleted between the create and the read is a race like the
// others: the try is made again.
func writeSignedNonce(ctx context.Context, c *Side, tn, providerID, nonce string, sig []byte) error {
	data := map[string][]byte{wire.NonceField: []byte(nonce)}
	if sig != nil {
		data[wire.SignedNonceField] = sig
	}
	fresh := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: wire.SignedNonceSecretName, Namespace: tn,
			Labels: map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: providerID}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	created := c.Client.Create(ctx, &fresh)
	if created == nil {
		return nil
	}
	var s corev1.Secret
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(&fresh), &s)
	switch {
	case apierrors.IsNotFound(err):
		return created // deleted since (tried again), or refused with nothing to reset
	case err != nil && !apierrors.IsAlreadyExists(created):
		return created
	case err != nil:
		return err
	case string(s.Data[wire.NonceField]) != nonce || s.Labels[wire.SignedNonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != providerID ||
		(sig != nil && !bytes.Equal(s.Data[wire.SignedNonceField], sig)):
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[wire.SignedNonceLabel], s.Labels[wire.RemoteClusterIDLabel] = "true", providerID
		s.Data = data
		return c.Client.Update(ctx, &s)
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
