// Package acceptance is the provider's verdict on a Tenant, shared by every controller
// that acts for an accepted consumer (tenant, providerslice, renewanswer, peergc): whether
// the Tenant sits where the protocol says (CheckPlacement), and whether its spec is what
// this provider accepted, by the seal only this provider's key makes (VerifySealed).
// Nothing in a Tenant is trusted: its spec is the consumer's, its status any
// tenants/status writer's; the seal binds the two.
package acceptance

import (
	"context"
	"crypto"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

// Refusal is a refusal of the protocol: an error with the reason a condition, an Event and
// liqoctl report (authn.ReasonOf).
func Refusal(reason authn.Reason, format string, args ...any) *authn.Error {
	return &authn.Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// CheckPlacement verifies that the Tenant sits where the protocol says: name, label and
// spec.clusterID agree, and its namespace is the tenant namespace of that cluster by this
// cluster's own record, not by labels anyone creating a namespace can set. A misplaced
// Tenant is an error with a reason (authn.ReasonOf); any other error is transient.
func CheckPlacement(ctx context.Context, p placement.Placement, t *authv1beta1.Tenant) error {
	id := string(t.Spec.ClusterID)
	if err := cluster.ValidateClusterID(id); err != nil {
		return Refusal(authv1beta1.ReasonInvalidClusterID, "spec.clusterID: %v", err)
	}
	if t.Name != id {
		return Refusal(authv1beta1.ReasonTenantNameMismatch, "the Tenant is named %q but spec.clusterID is %q: a Tenant is named after its cluster", t.Name, id)
	}
	if l := t.Labels[wire.RemoteClusterIDLabel]; l != id {
		return Refusal(authv1beta1.ReasonTenantLabelMismatch, "label %s is %q but spec.clusterID is %q", wire.RemoteClusterIDLabel, l, id)
	}
	ok, why, err := p.Verify(ctx, t.Namespace, id)
	if err != nil {
		return err
	}
	if !ok {
		return Refusal(authv1beta1.ReasonTenantMisplaced, "%s: a Tenant is accepted only in the tenant namespace this cluster's administrator made for its cluster", why)
	}
	return nil
}

// CSRDigest is the hex SHA-256 of a CSR as sent.
func CSRDigest(csr []byte) string { return authn.CSRDigest(csr) }

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
		return Refusal(authv1beta1.ReasonHandshakeChanged, "spec.publicKey or spec.csr changed after the handshake was accepted")
	}
	if verifyAcceptanceSealErr := authn.VerifyAcceptanceSeal(pub, acc, t.Status.AcceptanceSeal); verifyAcceptanceSealErr != nil {
		return verifyAcceptanceSealErr
	}
	tenantKey, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return err
	}
	_, err = authn.ValidateCSR(t.Spec.CSR, tenantKey, string(t.Spec.ClusterID))
	return err
}

// TenantsSealedBy are the Tenants c holds (namespace/name) whose acceptance key sealed for
// their spec (VerifySealed): on a provider whose key was switched, with the previous key,
// what the tenant controller has still to seal again before that key may be retired.
func TenantsSealedBy(ctx context.Context, c client.Reader, key crypto.Signer) ([]string, error) {
	var ts authv1beta1.TenantList
	if err := c.List(ctx, &ts); err != nil {
		return nil, fmt.Errorf("listing Tenants: %w", err)
	}
	var out []string
	for i := range ts.Items {
		if VerifySealed(&ts.Items[i], key.Public()) == nil {
			out = append(out, ts.Items[i].Namespace+"/"+ts.Items[i].Name)
		}
	}
	return out, nil
}

// SealedBy is VerifySealed with every key of this cluster's key set: around a rotation of
// this provider's key, a seal by the previous (or staged) key holds until the tenant
// controller seals the acceptance again with the current one. It returns the key that
// made the seal.
func SealedBy(t *authv1beta1.Tenant, keys cluster.KeySet) (crypto.Signer, error) {
	all := keys.All()
	if len(all) == 0 {
		return nil, Refusal(authn.ReasonAcceptanceSealInvalid, "this provider holds no key: no seal verifies")
	}
	var first error
	for _, k := range all {
		err := VerifySealed(t, k.Public())
		if err == nil {
			return k, nil
		}
		if first == nil || authn.ReasonOf(err) != authn.ReasonAcceptanceSealInvalid {
			first = err // a reason other than the seal's is the spec's: the same for every key
		}
	}
	return nil, first
}

// VerifySealedKeys is SealedBy for a caller that needs only the verdict.
func VerifySealedKeys(t *authv1beta1.Tenant, keys cluster.KeySet) error {
	_, err := SealedBy(t, keys)
	return err
}

// RecordedSealedBy says which key of keys sealed the acceptance the Tenant's status
// records (its key fingerprint and CSR digest, whatever the spec says now), nil when none
// did: what a rotation of the consumer's key moves from.
func RecordedSealedBy(t *authv1beta1.Tenant, keys cluster.KeySet) crypto.Signer {
	recorded := authn.Acceptance{TenantUID: string(t.UID), ClusterID: string(t.Spec.ClusterID),
		KeyFingerprint: t.Status.AcceptedKeyFingerprint, CSRDigest: t.Status.AcceptedCSRDigest}
	for _, k := range keys.All() {
		if authn.VerifyAcceptanceSeal(k.Public(), recorded, t.Status.AcceptanceSeal) == nil {
			return k
		}
	}
	return nil
}
