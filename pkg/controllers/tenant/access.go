package tenant

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// ensureAccess creates or repairs the Tenant's Role and RoleBindings, owned by the Tenant.
// When onlyRepair is set (Cordoned), missing objects are not created: nothing new is granted.
func (r *Reconciler) ensureAccess(ctx context.Context, t *authv1beta1.Tenant, rec *cluster.TenantRecord, onlyRepair bool) (granted bool, err error) {
	return ownedrbac.EnsureControlled(ctx, r.Client, r.APIReader, t, access.AccessObjects(t.Namespace, string(t.Spec.ClusterID), subjects(t, rec)), onlyRepair)
}

// subjects are the subjects the Tenant's bindings name: those of its accepted request
// (access.IdentitySubjects: Group <key group> for a key-bound identity, else User <C>),
// and, while a rotation the record holds to its sealed key is not done, the subject the
// old identity was bound as, so that both identities work until the consumer says it
// moved.
func subjects(t *authv1beta1.Tenant, rec *cluster.TenantRecord) []rbacv1.Subject {
	out := access.IdentitySubjects(string(t.Spec.ClusterID), csrOrganizations(t))
	if rot := rec.RotationTo(string(t.UID), t.Status.AcceptedKeyFingerprint); rot != nil && !rot.Done && rot.FromSubjectName != "" &&
		(rot.FromSubjectKind == rbacv1.UserKind || rot.FromSubjectKind == rbacv1.GroupKind) {
		old := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rot.FromSubjectKind, Name: rot.FromSubjectName}
		if !slices.Contains(out, old) {
			out = append(out, old)
		}
	}
	return out
}

// csrOrganizations are the Organizations of the Tenant's request, when it passes every
// rule for its key (nil otherwise: bound as Liqo's form).
func csrOrganizations(t *authv1beta1.Tenant) []string {
	pub, err := authn.ParsePublicKey(t.Spec.PublicKey)
	if err != nil {
		return nil
	}
	csr, err := authn.ValidateCSR(t.Spec.CSR, pub, string(t.Spec.ClusterID))
	if err != nil {
		return nil
	}
	return csr.Subject.Organization
}

// keyGroups are the key groups a revocation proof of the Tenant's consumer covers: its
// request's, and every one the record lists for its control plane.
func keyGroups(t *authv1beta1.Tenant, rec *cluster.TenantRecord) []string {
	out := rec.ControlPlaneKeyGroups()
	if g := access.KeyGroupIn(string(t.Spec.ClusterID), csrOrganizations(t)); g != "" && !slices.Contains(out, g) {
		out = append(out, g)
	}
	return out
}

// revokeAccess deletes the Tenant's Role and RoleBindings, then proves that its user can
// do none of what they granted, in any namespace, and is named by no other binding, with
// every key group of the consumer.
func (r *Reconciler) revokeAccess(ctx context.Context, t *authv1beta1.Tenant, rec *cluster.TenantRecord) (stillAllowed string, err error) {
	if deleteOwnedErr := r.deleteOwned(ctx, t); deleteOwnedErr != nil {
		return "", deleteOwnedErr
	}
	// Proven once, not settled (revocation.Settled): a grant the authorizer has not seen go
	// yet is proven again at the reconcile its binding's deletion event brings, and a
	// worker must not wait here at each reconcile of a Drained tenant that a binding made
	// by someone else keeps allowed.
	left, err := revocation.ProveRevoked(ctx, r.Client, r.Client, string(t.Spec.ClusterID), t.Namespace, access.TenantRules(t.Name), keyGroups(t, rec)...)
	if err != nil {
		return "", err
	}
	return strings.Join(left, "; "), nil
}

// deleteOwned deletes the Tenant's Role and RoleBindings: those of its names that it
// controls. An object of the same name controlled by anything else is left alone.
func (r *Reconciler) deleteOwned(ctx context.Context, t *authv1beta1.Tenant) error {
	return ownedrbac.DeleteControlled(ctx, r.Client, r.APIReader, t, access.AccessObjects(t.Namespace, string(t.Spec.ClusterID), nil))
}
