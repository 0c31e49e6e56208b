package tenant

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// verified is what a verified handshake records on the Tenant.
type verified struct {
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
func verifyHandshake(ctx context.Context, c, live client.Reader, t *authv1beta1.Tenant, ttl time.Duration, now time.Time) (*verified, error) {
	id := string(t.Spec.ClusterID)
	switch {
	case len(t.Spec.PublicKey) == 0:
		return nil, acceptance.Refusal(authv1beta1.ReasonPublicKeyMissing, "spec.publicKey is empty")
	case len(t.Spec.Signature) == 0:
		return nil, acceptance.Refusal(authv1beta1.ReasonSignatureMissing, "spec.signature is empty")
	case len(t.Spec.CSR) == 0:
		return nil, acceptance.Refusal(authv1beta1.ReasonCSRMissing, "spec.csr is empty")
	}
	if len(t.Spec.CSR) > authn.MaxCSRSize {
		return nil, acceptance.Refusal(authn.ReasonCSRTooLarge, "the CSR is %d bytes, more than the %d allowed", len(t.Spec.CSR), authn.MaxCSRSize)
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
	if verifyNonceSignatureErr := authn.VerifyNonceSignature(pub, nonce, t.Spec.Signature); verifyNonceSignatureErr != nil {
		return nil, verifyNonceSignatureErr
	}
	if _, validateCSRErr := authn.ValidateCSR(t.Spec.CSR, pub, id); validateCSRErr != nil {
		return nil, validateCSRErr
	}
	fp, err := authn.Fingerprint(pub)
	if err != nil {
		return nil, err
	}
	return &verified{fingerprint: fp, csrDigest: acceptance.CSRDigest(t.Spec.CSR), nonce: nonceSecret}, nil
}

// liveNonce returns the nonce Secret of the tenant namespace if it is filled, labelled
// for this cluster and younger than ttl. It is never searched outside that namespace.
func liveNonce(ctx context.Context, c client.Reader, ns, id string, ttl time.Duration, now time.Time) (*corev1.Secret, string, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.NonceSecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", acceptance.Refusal(authv1beta1.ReasonNonceMissing, "no nonce in namespace %q: it was never created or was already used; start a new handshake (liqoctl create nonce, or liqoctl authenticate)", ns)
		}
		return nil, "", err
	}
	if s.Labels[wire.NonceLabel] != "true" || s.Labels[wire.RemoteClusterIDLabel] != id {
		return nil, "", acceptance.Refusal(authv1beta1.ReasonNonceInvalid, "Secret %s/%s is not labelled as the nonce of cluster %q", ns, s.Name, id)
	}
	nonce := string(s.Data[wire.NonceField])
	if nonce == "" {
		return nil, "", acceptance.Refusal(authv1beta1.ReasonNonceMissing, "the nonce in namespace %q is not filled yet", ns)
	}
	if err := authn.CheckNonce(nonce); err != nil {
		return nil, "", acceptance.Refusal(authv1beta1.ReasonNonceInvalid, "the nonce in namespace %q is not canonical: %v", ns, err)
	}
	issued, err := nonceIssued(&s, now)
	if err != nil {
		return nil, "", err
	}
	if age := now.Sub(issued); age > ttl {
		return nil, "", acceptance.Refusal(authv1beta1.ReasonNonceExpired, "the nonce was issued %s ago, more than its %s lifetime: start a new handshake", age.Round(time.Second), ttl)
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
		return time.Time{}, acceptance.Refusal(authv1beta1.ReasonNonceIssueTimeInvalid, "annotation %s=%q is not an RFC 3339 time: the nonce Secret was tampered with; start a new handshake", wire.NonceIssuedAtAnnotation, v)
	case at.After(now.Add(clockSkew)):
		return time.Time{}, acceptance.Refusal(authv1beta1.ReasonNonceIssueTimeInvalid, "annotation %s=%q is in the future: the nonce Secret was tampered with; start a new handshake", wire.NonceIssuedAtAnnotation, v)
	case at.Before(issued):
		return at, nil
	}
	return issued, nil
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
		return acceptance.Refusal(authv1beta1.ReasonClusterIDIsSliceUser, "cluster ID %q is the user of %s on this provider: its grants would be that identity's too; the consumer needs another cluster ID", id, slice)
	}
	return nil
}
