package access

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestIsPeeringUserBinding(t *testing.T) {
	real := func() (*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRole) {
		var b *rbacv1.ClusterRoleBinding
		var cr *rbacv1.ClusterRole
		for _, o := range ForgePeeringUserAccess("liqo", "liqo-tenant-cl-a", "cl-a", PeeringUserName("cl-a", "0a1b2c3d")) {
			switch o := o.(type) {
			case *rbacv1.ClusterRoleBinding:
				b = o
			case *rbacv1.ClusterRole:
				cr = o
			}
		}
		return b, cr
	}
	for _, tc := range []struct {
		name   string
		change func(*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRole) *rbacv1.ClusterRole
		want   bool
	}{
		{"as generated", func(*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRole) *rbacv1.ClusterRole { return nil }, true},
		{"another name", func(b *rbacv1.ClusterRoleBinding, _ *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			b.Name = "x"
			return nil
		}, false},
		{"another role", func(b *rbacv1.ClusterRoleBinding, _ *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			b.RoleRef.Name = "x"
			return nil
		}, false},
		{"another subject", func(b *rbacv1.ClusterRoleBinding, _ *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			b.Subjects[0].Name = "cl-a"
			return nil
		}, false},
		{"a second subject", func(b *rbacv1.ClusterRoleBinding, _ *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "eve"})
			return nil
		}, false},
		{"a user of another consumer", func(b *rbacv1.ClusterRoleBinding, cr *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			u := PeeringUserName("cl-b", "00")
			b.Labels = map[string]string{wire.RemoteClusterIDLabel: "cl-a", wire.PeeringUserLabel: u}
			b.Subjects[0].Name = u
			return nil
		}, false},
		{"no ClusterRole", func(_ *rbacv1.ClusterRoleBinding, _ *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			return &rbacv1.ClusterRole{}
		}, false},
		{"a ClusterRole with other rules", func(_ *rbacv1.ClusterRoleBinding, cr *rbacv1.ClusterRole) *rbacv1.ClusterRole {
			cr.Rules = nil
			return nil
		}, false},
	} {
		b, cr := real()
		if other := tc.change(b, cr); other != nil {
			cr = other
		}
		if got := IsPeeringUserBinding(b, cr); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
