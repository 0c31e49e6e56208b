package tenant

import (
	"context"
	"crypto"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// Key rotation, both ways. This provider's own: a seal made by a key of its set that is
// not the current one (the previous key, after SwitchToNextKey) still holds, and is made
// again, over the same acceptance, with the current key (reseal), so that the previous key
// can be retired (acceptance.TenantsSealedBy lists what is left). A consumer's: the
// keyrotation controller records in the tenant record, which no tenant may write, the
// rotation a consumer proved with both keys, then moves the Tenant's spec to the new key
// and CSR; the seal then no longer verifies over the spec, and acceptRotation accepts the
// change only when the record names exactly it, for this very Tenant, from the sealed key.

// reseal seals the acceptance again with the current key when by, the key that made the
// seal, is another key of the set. The acceptance is the same: nothing else changes.
func (r *Reconciler) reseal(t *authv1beta1.Tenant, keys cluster.KeySet, by crypto.Signer) error {
	if keys.Current == nil || authn.PublicKeysEqual(by.Public(), keys.Current.Public()) {
		return nil
	}
	seal, err := authn.SealAcceptance(keys.Current, authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID),
		KeyFingerprint: t.Status.AcceptedKeyFingerprint, CSRDigest: t.Status.AcceptedCSRDigest})
	if err != nil {
		return fmt.Errorf("sealing the acceptance again: %w", err)
	}
	t.Status.AcceptanceSeal = seal
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, authv1beta1.ReasonResealed, "Reseal",
		"the acceptance of key %s was sealed by a key this provider rotated away from: sealed again with its current key", t.Status.AcceptedKeyFingerprint)
	return nil
}

// rotationFacts is what acceptRotation decides from: the Tenant's spec, its recorded
// acceptance, and the record.
type rotationFacts struct {
	rotation *cluster.KeyRotation
	// sealedFP is the fingerprint the status says was sealed; sealed says a key of this
	// provider's set made that seal.
	sealedFP string
	sealed   bool
	// specFP and specCSR are the fingerprint of spec.publicKey and the digest of spec.csr;
	// csrErr says whether spec.csr passes every rule for spec.publicKey, keyBound whether
	// it carries the key group.
	specFP, specCSR string
	csrErr          error
	keyBound        bool
}

// decideRotation says whether the Tenant's spec is the new key of a rotation the record
// holds for it, from the key its status sealed ("" when it is), or, in words, why not.
func decideRotation(f rotationFacts) string {
	switch rot := f.rotation; {
	case rot == nil:
		return "the record holds no key rotation of this Tenant to spec.publicKey"
	case !f.sealed:
		return "the acceptance the status records was not sealed by this provider"
	case rot.From != f.sealedFP:
		return fmt.Sprintf("the recorded rotation moves from key %s, not from the sealed key %s", rot.From, f.sealedFP)
	case rot.CSRDigest != f.specCSR:
		return "spec.csr is not the request the recorded rotation names"
	case f.csrErr != nil:
		return f.csrErr.Error()
	case !f.keyBound:
		return "spec.csr does not carry the key group of the new key"
	}
	return ""
}

// acceptRotation accepts a Tenant whose spec moved to the new key of a recorded rotation:
// it seals the new acceptance with the current key; the certificate of the new key is
// issued as for any new acceptance. moved is false when the spec is no recorded rotation
// (the handshake is then verified as usual, and refused).
func (r *Reconciler) acceptRotation(ctx context.Context, t *authv1beta1.Tenant, keys cluster.KeySet, now time.Time) (moved bool, err error) {
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, string(t.Spec.ClusterID))
	if err != nil {
		return false, err
	}
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return false, nil //nolint:nilerr // not a rotation: the handshake's own check refuses it
	}
	fp, err := authn.Fingerprint(pub)
	if err != nil {
		return false, nil //nolint:nilerr // not a rotation: the handshake's own check refuses it
	}
	if rec.RotationTo(string(t.UID), fp) == nil {
		// The keyrotation controller records the rotation before it moves the spec, but the
		// cache may show the Tenant's change first: the record is read again, live, only
		// on this path (a spec that no longer matches its seal).
		if rec, err = cluster.GetTenantRecord(ctx, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID)); err != nil {
			return false, err
		}
	}
	csr, csrErr := authn.ValidateCSR(t.Spec.CSR, pub, string(t.Spec.ClusterID))
	f := rotationFacts{rotation: rec.RotationTo(string(t.UID), fp), sealedFP: t.Status.AcceptedKeyFingerprint,
		sealed: acceptance.RecordedSealedBy(t, keys) != nil, specFP: fp, specCSR: authn.CSRDigest(t.Spec.CSR), csrErr: csrErr,
		keyBound: csrErr == nil && authn.CSRKeyGroup(csr) != ""}
	if decideRotation(f) != "" {
		return false, nil
	}
	seal, err := authn.SealAcceptance(keys.Current, authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID), KeyFingerprint: fp, CSRDigest: f.specCSR})
	if err != nil {
		return false, fmt.Errorf("sealing the rotated acceptance: %w", err)
	}
	from := t.Status.AcceptedKeyFingerprint
	t.Status.AcceptedKeyFingerprint, t.Status.AcceptedCSRDigest, t.Status.AcceptanceSeal = fp, f.specCSR, seal
	t.Status.AcceptedAt = &metav1.Time{Time: now}
	// The certificate published is the old key's: the new key's is issued anew.
	t.Status.AuthParams, t.Status.Certificate = nil, nil
	r.setCondition(t, authv1beta1.ConditionAuthenticated, true, authv1beta1.ReasonKeyRotationAccepted,
		fmt.Sprintf("the consumer moved from key %s to key %s, proven with both keys (tenant record): sealed for the new key", from, fp), corev1.EventTypeNormal)
	return true, nil
}

// checkNotRotatedAway refuses a handshake, in the Tenant that moved, with the key a
// recorded rotation moved away from: the nonce that key signed may still be live, and a
// Tenant writer who put the old spec back would otherwise have the old identity bound
// again.
func (r *Reconciler) checkNotRotatedAway(ctx context.Context, t *authv1beta1.Tenant) error {
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, string(t.Spec.ClusterID))
	if err != nil || rec == nil || rec.KeyRotation == nil {
		return err
	}
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return nil //nolint:nilerr // the handshake's own check refuses a key that does not parse
	}
	if fp, err := authn.Fingerprint(pub); err == nil && rec.RotatedAwayFrom(fp) {
		return acceptance.Refusal(authv1beta1.ReasonHandshakeChanged, "spec.publicKey is key %s, which this Tenant's consumer rotated away from (tenant record): it is never accepted again here", fp)
	}
	return nil
}
