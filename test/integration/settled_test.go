package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestSettledProofStillReportsANamespaceAdminsGrant: the proof of unauthenticate asks
// again while the authorizer may lag (revocation.Settled), and a grant that stays is still
// reported once that window has passed. The grant is made by the weakest principal that
// can make one: the administrator of one namespace, binding its own Role to the
// consumer's user there.
func TestSettledProofStillReportsANamespaceAdminsGrant(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}))
	admin := principal(t, p, "team-admin", "team",
		rule(rbacv1.GroupName, "roles", "create", "delete"), rule(rbacv1.GroupName, "rolebindings", "create", "delete"), rule("", "pods", "get"))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "team"}, Rules: []rbacv1.PolicyRule{rule("", "pods", "get")}}
	require.NoError(t, admin.Create(ctx, role))
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "team"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: c.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	require.NoError(t, admin.Create(ctx, binding))

	_, _, err := runCLI(t, pairArgs("unauthenticate", c, p)...)
	require.ErrorIs(t, err, handshake.ErrAccessNotRevoked, "a grant that stays is reported after the window")
	assert.Contains(t, err.Error(), `RoleBinding "kept" in namespace "team"`)

	require.NoError(t, admin.Delete(ctx, binding))
	_, errOut := mustCLI(t, pairArgs("unauthenticate", c, p)...)
	assert.Contains(t, errOut, "Access revoked: verified")
}
