package installer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestDefaultManagerImage(t *testing.T) {
	for v, want := range map[string]string{
		"v1.2.3":       ManagerImageRepository + ":v1.2.3",
		"1.2.3":        ManagerImageRepository + ":1.2.3",
		"v1.2.3-rc.1":  ManagerImageRepository + ":v1.2.3-rc.1",
		"dev":          "",
		"600d733":      "",
		"v1.2.3-dirty": ManagerImageRepository + ":v1.2.3-dirty",
		"v1.2":         "",
	} {
		assert.Equal(t, want, DefaultManagerImage(v), v)
	}
}

func TestManifestObjectsHoldNoSecrets(t *testing.T) {
	objs, err := ManifestObjects(InstallOptions{Namespace: "liqo"}, "img:1")
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		switch obj := o.(type) {
		case *corev1.Secret:
			assert.Empty(t, obj.Data, "no key in a manifest")
		case *corev1.ConfigMap:
			if obj.Name == wire.ClusterIDConfigMapName {
				assert.Empty(t, obj.Data[wire.ClusterIDKey], "no cluster ID in a release manifest: each cluster needs its own")
			}
		}
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	assert.Subset(t, kinds, []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "Deployment", "PodDisruptionBudget", "Secret", "ConfigMap"})
	withID, err := ManifestObjects(InstallOptions{Namespace: "liqo", ClusterID: "cl-a"}, "")
	require.NoError(t, err)
	for _, o := range withID {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == wire.ClusterIDConfigMapName {
			assert.Equal(t, "cl-a", cm.Data[wire.ClusterIDKey])
		}
		assert.NotEqual(t, "Deployment", o.GetObjectKind().GroupVersionKind().Kind, "no manager without an image")
	}
}

// TestPoliciesComeBeforeTheManagersRights: every admission policy (and binding) is applied
// before the first RBAC object granting the manager's ServiceAccount its rules, so that a
// token used during an installation never holds them unbounded.
func TestPoliciesComeBeforeTheManagersRights(t *testing.T) {
	objs, err := InstallObjects(InstallOptions{Namespace: "liqo"})
	require.NoError(t, err)
	lastPolicy, firstRight := -1, len(objs)
	for i, o := range objs {
		switch obj := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding,
			*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			lastPolicy = i
		case *rbacv1.ClusterRole:
			if obj.Name == wire.ManagerName || obj.Name == wire.ManagerTenantRoleName {
				firstRight = min(firstRight, i)
			}
		case *rbacv1.ClusterRoleBinding, *rbacv1.RoleBinding, *rbacv1.Role:
			firstRight = min(firstRight, i)
		}
	}
	require.GreaterOrEqual(t, lastPolicy, 0, "the install objects hold admission policies")
	assert.Less(t, lastPolicy, firstRight, "every admission policy before the manager's RBAC")
}
