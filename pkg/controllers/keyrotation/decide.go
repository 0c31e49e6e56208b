package keyrotation

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// request is what a rotation request is judged on, gathered once: the Renew, the
// verdicts the reconciler read from the cluster (placement, the Tenant's seal and state),
// and the tenant record.
type request struct {
	renew *authv1beta1.Renew
	// providerID is this cluster's ID, the Rotation's ProviderID.
	providerID string
	// misplaced says, in words, why the Renew is not in the recorded tenant namespace of
	// its consumer ("" when it is).
	misplaced string
	// tenant is the consumer's Tenant there (nil: none); notAccepted says, in words, why
	// its acceptance does not count ("" when it is sealed by this provider and not
	// Drained).
	tenant      *authv1beta1.Tenant
	notAccepted string
	// record is the consumer's tenant record (nil: none).
	record *cluster.TenantRecord
}

// verdict is the end of the checks: a refusal (reason and message) or the rotation they
// proved.
type verdict struct {
	reason, message string
	rotation        *authn.Rotation
	// newKey is the key the consumer moves to.
	newKey crypto.PublicKey
}

func refusal(reason, format string, args ...any) *verdict {
	return &verdict{reason: reason, message: fmt.Sprintf(format, args...)}
}

// statement is the Rotation the Renew states, over the Tenant it names: filled as far as
// the Renew's content allows (fields left empty never verify).
func statement(q *request, newKey crypto.PublicKey) authn.Rotation {
	r := authn.Rotation{ConsumerID: string(q.renew.Spec.ConsumerClusterID), ProviderID: q.providerID,
		From: q.renew.Annotations[wire.RotationFromAnnotation], CSRDigest: authn.CSRDigest(q.renew.Spec.CSR)}
	if q.tenant != nil {
		r.TenantUID = string(q.tenant.UID)
	}
	if newKey != nil {
		r.To, _ = authn.Fingerprint(newKey)
	}
	return r
}

// signature decodes the base64 signature in annotation key of the Renew (nil: none or not
// base64).
func signature(rn *authv1beta1.Renew, key string) []byte {
	sig, err := base64.StdEncoding.DecodeString(rn.Annotations[key])
	if err != nil {
		return nil
	}
	return sig
}

// check is one step of the verification of a rotation request: a refusal, or nil to go on.
type check func(q *request, v *verdict) *verdict

// checks are the verifications of a rotation request, in the order docs/protocol.md gives:
// the first that fails decides, and nothing changes.
func checks() []check {
	return []check{checkPlacement, checkAccepted, checkFrom, checkOldSignature, checkNewKey, checkCSR, checkNewSignature, checkNoOtherRotation}
}

// decide runs the checks: the proven rotation, or the first refusal.
func decide(q *request) *verdict {
	v := &verdict{}
	for _, c := range checks() {
		if r := c(q, v); r != nil {
			return r
		}
	}
	rot := statement(q, v.newKey)
	v.rotation = &rot
	return v
}

func checkPlacement(q *request, _ *verdict) *verdict {
	if q.misplaced != "" {
		return refusal(authv1beta1.ReasonKeyRotationMisplaced, "%s: a key rotation is taken only in the tenant namespace of its spec.consumerClusterID", q.misplaced)
	}
	if t := q.renew.Spec.IdentityType; t != authv1beta1.ControlPlaneIdentityType {
		return refusal(authv1beta1.ReasonKeyRotationMisplaced, "identityType %q: a key rotation moves the ControlPlane identity", t)
	}
	return nil
}

func checkAccepted(q *request, _ *verdict) *verdict {
	if q.notAccepted != "" {
		return refusal(authv1beta1.ReasonKeyRotationTenantNotAccepted, "%s", q.notAccepted)
	}
	return nil
}

func checkFrom(q *request, _ *verdict) *verdict {
	if from := q.renew.Annotations[wire.RotationFromAnnotation]; from != q.tenant.Status.AcceptedKeyFingerprint {
		return refusal(authv1beta1.ReasonKeyRotationFromMismatch, "annotation %s is %q, not the key %s this provider sealed for Tenant %s/%s",
			wire.RotationFromAnnotation, from, q.tenant.Status.AcceptedKeyFingerprint, q.tenant.Namespace, q.tenant.Name)
	}
	return nil
}

func checkOldSignature(q *request, v *verdict) *verdict {
	// The statement names the new key by its fingerprint: a key that does not parse (or
	// is of a type not allowed) makes none, and is refused as such. Parsed once, here.
	newKey, err := authn.ParsePublicKey(q.renew.Spec.PublicKey)
	if err != nil {
		return refusal(authv1beta1.ReasonKeyRotationNewKeyInvalid, "spec.publicKey: %v", err)
	}
	v.newKey = newKey
	old, err := authn.ParsePublicKey(q.tenant.Spec.PublicKey)
	if err == nil {
		err = authn.VerifyRotation(old, statement(q, newKey), signature(q.renew, wire.RotationOldSignatureAnnotation))
	}
	if err != nil {
		return refusal(authv1beta1.ReasonKeyRotationOldSignatureInvalid, "annotation %s: %v", wire.RotationOldSignatureAnnotation, err)
	}
	return nil
}

// checkNewKey refuses a move to the key moved from (checkOldSignature parsed the new key).
func checkNewKey(q *request, v *verdict) *verdict {
	if fp, _ := authn.Fingerprint(v.newKey); fp == q.tenant.Status.AcceptedKeyFingerprint {
		return refusal(authv1beta1.ReasonKeyRotationNewKeyInvalid, "spec.publicKey is the key the consumer moves from")
	}
	return nil
}

func checkCSR(q *request, v *verdict) *verdict {
	csr, err := authn.ValidateCSR(q.renew.Spec.CSR, v.newKey, string(q.renew.Spec.ConsumerClusterID))
	if err != nil {
		return refusal(authv1beta1.ReasonKeyRotationCSRInvalid, "spec.csr: %v", err)
	}
	if authn.CSRKeyGroup(csr) == "" {
		return refusal(authv1beta1.ReasonKeyRotationCSRInvalid, "spec.csr carries no key group: a rotated identity is bound by its key (authn.ForgeKeyBoundCSRFor)")
	}
	return nil
}

func checkNewSignature(q *request, v *verdict) *verdict {
	if err := authn.VerifyRotation(v.newKey, statement(q, v.newKey), signature(q.renew, wire.RotationNewSignatureAnnotation)); err != nil {
		return refusal(authv1beta1.ReasonKeyRotationNewSignatureInvalid, "annotation %s: %v", wire.RotationNewSignatureAnnotation, err)
	}
	return nil
}

// checkNoOtherRotation refuses a second rotation of the live Tenant while the record holds
// one of it not done.
func checkNoOtherRotation(q *request, v *verdict) *verdict {
	rot := q.record.KeyRotation
	// A rotation of a Tenant that no longer exists is over: its old key stays refused
	// (cluster.NextRotation keeps it), and it blocks no rotation of the live Tenant.
	if rot == nil || rot.Done || rot.TenantUID != string(q.tenant.UID) {
		return nil
	}
	to, _ := authn.Fingerprint(v.newKey)
	if rot.TenantUID != string(q.tenant.UID) || rot.From != q.tenant.Status.AcceptedKeyFingerprint || rot.To != to || rot.CSRDigest != authn.CSRDigest(q.renew.Spec.CSR) {
		return refusal(authv1beta1.ReasonKeyRotationConflict, "the tenant record holds another rotation of this consumer, from key %s to key %s, not done yet", rot.From, rot.To)
	}
	return nil
}

// recorded says whether the Renew states the rotation rot the record holds: same Tenant,
// keys and CSR. Then the request was proven already, and the Renew is followed (answered,
// then ended) instead of checked again.
func recorded(q *request, rot *cluster.KeyRotation) bool {
	if rot == nil || q.tenant == nil || q.misplaced != "" {
		return false
	}
	newKey, err := authn.ParsePublicKey(q.renew.Spec.PublicKey)
	if err != nil {
		return false
	}
	s := statement(q, newKey)
	return rot.TenantUID == s.TenantUID && rot.From == s.From && rot.To == s.To && rot.CSRDigest == s.CSRDigest
}

// oldSubject is the subject the Tenant's identity is bound as now (before it moves):
// what its accepted request says (access.IdentitySubjects).
func oldSubject(t *authv1beta1.Tenant) rbacv1.Subject {
	var orgs []string
	if pub, err := authn.ParsePublicKey(t.Spec.PublicKey); err == nil {
		if csr, err := authn.ValidateCSR(t.Spec.CSR, pub, string(t.Spec.ClusterID)); err == nil {
			orgs = csr.Subject.Organization
		}
	}
	return access.IdentitySubjects(string(t.Spec.ClusterID), orgs)[0]
}

// answerable says whether the Tenant publishes a certificate for the rotation's new key:
// what the Renew's status then carries.
func answerable(t *authv1beta1.Tenant, rot *cluster.KeyRotation) bool {
	if t == nil || t.Status.AcceptedKeyFingerprint != rot.To || !t.Status.AuthParams.HasCertificate() {
		return false
	}
	cert, err := authn.ParseCertificate(t.Status.AuthParams.SignedCRT)
	return err == nil && certificateFor(cert, rot.To)
}

func certificateFor(cert *x509.Certificate, fp string) bool {
	got, err := authn.Fingerprint(cert.PublicKey)
	return err == nil && got == fp
}
