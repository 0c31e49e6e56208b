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
