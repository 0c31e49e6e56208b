package revocation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestBindingString(t *testing.T) {
	b := Binding{Kind: "RoleBinding", Namespace: "team", Name: "edit", RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "cl-a"}}
	assert.Equal(t, `RoleBinding "edit" in namespace "team" (ClusterRole "edit" to User "cl-a")`, b.String())
}

// TestSubjectKeys: the index lists a binding under each user and group it names, in the
// form the scan asks for, and under nothing else.
func TestSubjectKeys(t *testing.T) {
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "team"},
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cl-a"},
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "liqo.io"},
	}
	want := []string{subjectKey(rbacv1.UserKind, "cl-a"), subjectKey(rbacv1.GroupKind, "liqo.io")}
	assert.Equal(t, []string{"User/cl-a", "Group/liqo.io"}, want)
	assert.Equal(t, want, subjectKeys(&rbacv1.RoleBinding{Subjects: subjects}))
	assert.Equal(t, want, subjectKeys(&rbacv1.ClusterRoleBinding{Subjects: subjects}))
	assert.Empty(t, subjectKeys(&rbacv1.RoleBinding{Subjects: subjects[:1]}))
	assert.Empty(t, subjectKeys(&rbacv1.Role{}))
}
