package tenant

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

func refusal(reason authn.Reason, format string, args ...any) *authn.Error {
	return &authn.Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// CheckPlacement verifies that the Tenant sits where the protocol says: name, label and
// spec.clusterID agree, and its namespace is the tenant namespace of that cluster by this
// cluster's own record, not by labels anyone creating a namespace can set. A misplaced
// Tenant is an error with a reason (authn.ReasonOf); any other error is transient.
func CheckPlacement(ctx context.Context, p placement.Placement, t *authv1beta1.Tenant) error {
	id := string(t.Spec.ClusterID)
	if err := cluster.ValidateClusterID(id); err != nil {
		return refusal(authv1beta1.ReasonInvalidClusterID, "spec.clusterID: %v", err)
	}
	if t.Name != id {
		return refusal(authv1beta1.ReasonTenantNameMismatch, "the Tenant is named %q but spec.clusterID is %q: a Tenant is named after its cluster", t.Name, id)
	}
	if l := t.Labels[wire.RemoteClusterIDLabel]; l != id {
		return refusal(authv1beta1.ReasonTenantLabelMismatch, "label %s is %q but spec.clusterID is %q", wire.RemoteClusterIDLabel, l, id)
	}
	ok, why, err := p.Verify(ctx, t.Namespace, id)
	if err != nil {
		return err
	}
	if !ok {
		return refusal(authv1beta1.ReasonTenantMisplaced, "%s: a Tenant is accepted only in the tenant namespace this cluster's administrator made for its cluster", why)
	}
	return nil
}

// acceptance is what a verified handshake records on the Tenant.
type acceptance struct {
	fingerprint string
	csrDigest   string
	nonce       *corev1.Secret
}

// verifyHandshake applies every rule of the protocol to a Tenant that has not been
// accepted: a live, unexpired nonce in its own namespace, a key of an allowed type, a
// signature of that nonce by that key, and a CSR that passes authn.ValidateCSR. The nonce
// is read from the cache c and, when that copy would be refused, from the API server live
// (nil: none): the consumer read the nonce filled from the API server before it signed, and
// a refusal is only ever of what the API server holds, never of a cache that lags.
func verifyHandshake(ctx context.Context, c, live client.Reader, t *authv1beta1.Tenant, ttl time.Duration, now time.Time) (*acceptance, error) {
	id := string(t.Spec.ClusterID)
	switch {
	case len(t.Spec.PublicKey) == 0:
		return nil, refusal(authv1beta1.ReasonPublicKeyMissing, "spec.publicKey is empty")
	case len(t.Spec.Signature) == 0:
		return nil, refusal(authv1beta1.ReasonSignatureMissing, "spec.signature is empty")
	case len(t.Spec.CSR) == 0:
		return nil, refusal(authv1beta1.ReasonCSRMissing, "spec.csr is empty")
	}
	if len(t.Spec.CSR) > authn.MaxCSRSize {
		return nil, refusal(authn.ReasonCSRTooLarge, "the CSR is %d bytes, more than the %d allowed", len(t.Spec.CSR), authn.MaxCSRSize)
	}
	nonceSecret, nonce, err := liveNonce(ctx, c, t.Namespace, id, ttl, now)
	if authn.ReasonOf(err) != "" && live != nil {
		nonceSecret, nonce, err = liveNonce(ctx, live, t.Namespace, id, ttl, now)
	}
	if err != nil {
		return nil, err
	}
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := authn.VerifyNonceSignature(pub, nonce, t.Spec.Signature); err != nil {
		return nil, err
	}
	if _, err := authn.ValidateCSR(t.Spec.CSR, pub, id); err != nil {
		return nil, err
	}
	fp, err := authn.Fingerprint(pub)
	if err != nil {
		return nil, err
	}
	return &acceptance{fingerprint: fp, csrDigest: CSRDigest(t.Spec.CSR), nonce: nonceSecret}, nil
}

// liveNonce returns the nonce Secret of the tenant namespace if it is filled, labelled
// for this cluster and younger than ttl. It is never searched outside that namespace.
func liveNonce(ctx context.Context, c client.Reader, ns, id string, ttl time.Duration, now time.Time) (*corev1.Secret, string, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.NonceSecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", refusal(authv1beta1.ReasonNonceMissing, "no nonce in namespace %q: it was never created or was already used; start a new handshake (liqoctl create nonce, or liqoctl authenticate)", ns)
		}
		return nil, "", err
	}
	if s.Labels[wire.NonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != id {
		return nil, "", refusal(authv1beta1.ReasonNonceInvalid, "Secret %s/%s is not labelled as the nonce of cluster %q", ns, s.Name, id)
	}
	nonce := string(s.Data[wire.NonceField])
	if nonce == "" {
		return nil, "", refusal(authv1beta1.ReasonNonceMissing, "the nonce in namespace %q is not filled yet", ns)
	}
	if err := authn.CheckNonce(nonce); err != nil {
		return nil, "", refusal(authv1beta1.ReasonNonceInvalid, "the nonce in namespace %q is not canonical: %v", ns, err)
	}
	issued, err := nonceIssued(&s, now)
	if err != nil {
		return nil, "", err
	}
	if age := now.Sub(issued); age > ttl {
		return nil, "", refusal(authv1beta1.ReasonNonceExpired, "the nonce was issued %s ago, more than its %s lifetime: start a new handshake", age.Round(time.Second), ttl)
	}
	return &s, nonce, nil
}

// clockSkew is how far in the future an issue-time stamp written by another machine (a
// CLI) may be before it is refused.
const clockSkew = time.Minute

// nonceIssued is when a nonce counts as issued: the creation of its Secret, which only the
// API server writes. The issue-time annotation, writable by anyone who may update the
// Secret, can only make it earlier: a stamp in the future, or one that does not parse, is
// refused.
func nonceIssued(s *corev1.Secret, now time.Time) (time.Time, error) {
	issued := s.CreationTimestamp.Time
	v, ok := s.Annotations[wire.NonceIssuedAtAnnotation]
	if !ok {
		return issued, nil
	}
	at, err := time.Parse(time.RFC3339, v)
	switch {
	case err != nil:
		return time.Time{}, refusal(authv1beta1.ReasonNonceIssueTimeInvalid, "annotation %s=%q is not an RFC 3339 time: the nonce Secret was tampered with; start a new handshake", wire.NonceIssuedAtAnnotation, v)
	case at.After(now.Add(clockSkew)):
		return time.Time{}, refusal(authv1beta1.ReasonNonceIssueTimeInvalid, "annotation %s=%q is in the future: the nonce Secret was tampered with; start a new handshake", wire.NonceIssuedAtAnnotation, v)
	case at.Before(issued):
		return at, nil
	}
	return issued, nil
}

// CSRDigest is the hex SHA-256 of a CSR as sent.
func CSRDigest(csr []byte) string {
	sum := sha256.Sum256(csr)
	return hex.EncodeToString(sum[:])
}

// acceptanceOf is what the seal of a Tenant covers, computed from its spec: a seal made
// for another key or CSR does not verify.
func acceptanceOf(t *authv1beta1.Tenant) (authn.Acceptance, error) {
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return authn.Acceptance{}, err
	}
	fp, err := authn.Fingerprint(pub)
	if err != nil {
		return authn.Acceptance{}, err
	}
	return authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID), KeyFingerprint: fp, CSRDigest: CSRDigest(t.Spec.CSR)}, nil
}

// VerifySealed checks that the Tenant's spec is what this provider accepted: the seal in
// its status verifies, with this cluster's key, over the spec's own key and CSR, and the
// CSR still passes every rule. It is asked again right before a CSR is submitted or
// approved, so that writing the status is never enough to have a certificate issued.
func VerifySealed(t *authv1beta1.Tenant, pub crypto.PublicKey) error {
	acc, err := acceptanceOf(t)
	if err != nil {
		return err
	}
	if acc.KeyFingerprint != t.Status.AcceptedKeyFingerprint || acc.CSRDigest != t.Status.AcceptedCSRDigest {
		return refusal(authv1beta1.ReasonHandshakeChanged, "spec.publicKey or spec.csr changed after the handshake was accepted")
	}
	if err := authn.VerifyAcceptanceSeal(pub, acc, t.Status.AcceptanceSeal); err != nil {
		return err
	}
	tenantKey, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return err
	}
	_, err = authn.ValidateCSR(t.Spec.CSR, tenantKey, string(t.Spec.ClusterID))
	return err
}

// checkNotSliceUser refuses a Tenant whose cluster ID is the user name of a ResourceSlice
// identity on this provider (a slice <rs> of consumer C is user <rs>-<hash of C>, which any
// string can equal): the grants of that cluster ID would be the slice identity's too. Both
// the slices that exist and those whose certificates the records list as valid count.
func (r *Reconciler) checkNotSliceUser(ctx context.Context, t *authv1beta1.Tenant) error {
	id := string(t.Spec.ClusterID)
	slice, err := cluster.SliceUser(ctx, r.Client, r.Placement.LiqoNamespace, id, r.Now())
	if err != nil {
		return err
	}
	if slice != "" {
		return refusal(authv1beta1.ReasonClusterIDIsSliceUser, "cluster ID %q is the user of %s on this provider: its grants would be that identity's too; the consumer needs another cluster ID", id, slice)
	}
	return nil
}
