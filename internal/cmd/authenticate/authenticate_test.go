package authenticate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestFormatRules(t *testing.T) {
	out := formatRules([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, ResourceNames: []string{"x"}, Verbs: []string{"get", "watch"}},
	})
	assert.Contains(t, out, "core/configmaps")
	assert.Contains(t, out, "authentication.liqo.io/tenants")
	assert.Contains(t, out, "get,watch (only x)")
}
