package access

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestManagerRulesWriteNothingClusterWide: the one write the cluster-wide role has on these
// resources is creating RoleBindings, which the admission policy wire.ManagerBindingPolicyName
// bounds to tenant namespaces.
func TestManagerRulesWriteNothingClusterWide(t *testing.T) {
	var bounded bool
	for _, o := range ForgeManagerPolicy("liqo") {
		bounded = bounded || o.GetName() == wire.ManagerBindingPolicyName
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

func TestSliceConsumer(t *testing.T) {
	id := authv1beta1.ClusterID("cl-spec")
	for _, tc := range []struct {
		name         string
		rs           authv1beta1.ResourceSlice
		consumer     string
		providerCopy bool
	}{
		{"the spec wins over the label", authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{wire.ReplicationStatusLabel: "true", wire.RemoteClusterIDLabel: "cl-label"}},
			Spec: authv1beta1.ResourceSliceSpec{ConsumerClusterID: &id}}, "cl-spec", true},
		{"the label without a spec", authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{wire.ReplicationStatusLabel: "true", wire.RemoteClusterIDLabel: "cl-label"}}}, "cl-label", true},
		{"a consumer's own request is no provider copy", authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{wire.ReplicationRequestedLabel: "true", wire.RemoteClusterIDLabel: "cl-p"}}}, "cl-p", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			consumer, providerCopy := SliceConsumer(&tc.rs)
			assert.Equal(t, tc.consumer, consumer)
			assert.Equal(t, tc.providerCopy, providerCopy)
		})
	}
}
