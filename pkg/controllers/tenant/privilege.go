package tenant

import (
	"context"
	"slices"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// extraPermissions says what user <clusterID> with group liqo.io may do on this cluster
// beyond what this Tenant's own bindings grant (revocation.UnexpectedPermissions). A consumer
// must never receive the powers of an existing user by choosing its name as cluster ID.
func (r *Reconciler) extraPermissions(ctx context.Context, t *authv1beta1.Tenant) ([]string, error) {
	groups := []string{wire.UserGroup}
	if g := access.KeyGroupIn(string(t.Spec.ClusterID), csrOrganizations(t)); g != "" {
		groups = append(groups, g) // a key-bound certificate authenticates with its key group too
	}
	return revocation.UnexpectedPermissions(ctx, r.Client, string(t.Spec.ClusterID), groups, func(b revocation.Binding) bool { return ownBinding(b, t) })
}

// ownBinding reports whether b is one of the bindings this Tenant controls.
func ownBinding(b revocation.Binding, t *authv1beta1.Tenant) bool {
	return b.Kind == "RoleBinding" && b.Namespace == t.Namespace && b.ControllerUID == string(t.UID) &&
		slices.Contains([]string{wire.ControlPlaneBindingName, wire.TenantReaderName}, b.Name)
}
