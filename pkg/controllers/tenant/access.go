package tenant

import (
	"context"
	"strings"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// ensureAccess creates or repairs the Tenant's Role and RoleBindings, owned by the Tenant.
// When onlyRepair is set (Cordoned), missing objects are not created: nothing new is granted.
func (r *Reconciler) ensureAccess(ctx context.Context, t *authv1beta1.Tenant, onlyRepair bool) (granted bool, err error) {
	return ownedrbac.EnsureControlled(ctx, r.Client, r.APIReader, t, access.AccessObjects(t.Namespace, string(t.Spec.ClusterID)), onlyRepair)
}

// revokeAccess deletes the Tenant's Role and RoleBindings, then proves that its user can
// do none of what they granted, in any namespace, and is named by no other binding.
func (r *Reconciler) revokeAccess(ctx context.Context, t *authv1beta1.Tenant) (stillAllowed string, err error) {
	if deleteOwnedErr := r.deleteOwned(ctx, t); deleteOwnedErr != nil {
		return "", deleteOwnedErr
	}
	left, err := revocation.ProveRevoked(ctx, r.Client, r.Client, string(t.Spec.ClusterID), t.Namespace, access.TenantRules(t.Name))
	if err != nil {
		return "", err
	}
	return strings.Join(left, "; "), nil
}

// deleteOwned deletes the Tenant's Role and RoleBindings: those of its names that it
// controls. An object of the same name controlled by anything else is left alone.
func (r *Reconciler) deleteOwned(ctx context.Context, t *authv1beta1.Tenant) error {
	return ownedrbac.DeleteControlled(ctx, r.Client, r.APIReader, t, access.AccessObjects(t.Namespace, string(t.Spec.ClusterID)))
}
