package access

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagerRulesWriteNothingClusterWide: the one write the cluster-wide role has on these
// resources is creating RoleBindings, which the admission policy ManagerBindingPolicyName
// bounds to tenant namespaces.
func TestManagerRulesWriteNothingClusterWide(t *testing.T) {
	var bounded bool
	for _, o := range ForgeManagerPolicy("liqo") {
		bounded = bounded || o.GetName() == ManagerBindingPolicyName
	}
	require.True(t, bounded, "the RoleBindings the manager creates are bounded by an admission policy")
	for _, r := range ManagerRules() {
		for _, v := range r.Verbs {
			if v == "create" || v == "update" || v == "patch" || v == "delete" {
				for _, res := range r.Resources {
					if res == "rolebindings" && v == "create" {
						continue
					}
					assert.NotContains(t, []string{"secrets", "roles", "rolebindings", "leases", "configmaps", "clusterrolebindings", "clusterroles"}, res,
						"the cluster-wide role may not write %s", res)
				}
			}
		}
	}
}

func TestRulesAreLeastPrivilege(t *testing.T) {
	for _, r := range append(ControlPlaneRules(), TenantReaderRules("x")...) {
		for _, res := range r.Resources {
			assert.NotContains(t, []string{"secrets", "*", "roles", "rolebindings", "pods"}, res)
			if strings.HasSuffix(res, "/status") {
				assert.Equal(t, []string{"get"}, r.Verbs, "status is read-only")
			}
		}
		assert.NotContains(t, r.Verbs, "*")
		assert.NotContains(t, r.Verbs, "escalate")
		assert.NotContains(t, r.Verbs, "bind")
		assert.NotContains(t, r.Verbs, "impersonate")
	}
	assert.Equal(t, []string{"x"}, TenantReaderRules("x")[0].ResourceNames)
}
