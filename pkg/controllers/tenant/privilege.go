package tenant

import (
	"context"
	"fmt"
	"slices"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// extraPermissions says what user <clusterID> with group liqo.io may do on this cluster
// beyond what this Tenant's own bindings grant: every RoleBinding (in any namespace) and
// ClusterRoleBinding naming that user or group, and the powerful actions any authorizer
// allows it beyond what every authenticated user may. A consumer must never receive the
// powers of an existing user by choosing its name as cluster ID.
func (r *Reconciler) extraPermissions(ctx context.Context, t *authv1beta1.Tenant) ([]string, error) {
	id := string(t.Spec.ClusterID)
	bindings, err := cluster.BindingsNaming(ctx, r.Client, id, []string{cluster.UserGroup})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bindings {
		if !ownBinding(b, t) {
			out = append(out, b.String())
		}
	}
	sentinels, err := cluster.SentinelsAllowed(ctx, r.Client, id, []string{cluster.UserGroup, "system:authenticated"})
	if err != nil {
		return nil, err
	}
	for _, s := range sentinels {
		out = append(out, fmt.Sprintf("may %s (%s)", s.Action, s.Reason))
	}
	return out, nil
}

// ownBinding reports whether b is one of the bindings this Tenant controls.
func ownBinding(b cluster.Binding, t *authv1beta1.Tenant) bool {
	return b.Kind == "RoleBinding" && b.Namespace == t.Namespace && b.ControllerUID == string(t.UID) &&
		slices.Contains([]string{cluster.ControlPlaneBindingName, cluster.TenantReaderName}, b.Name)
}
