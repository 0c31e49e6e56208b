package access

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestIsPeeringUserClusterRole(t *testing.T) {
	real := func() *rbacv1.ClusterRole {
		for _, o := range ForgePeeringUserAccess("liqo", "liqo-tenant-cl-a", "cl-a", PeeringUserName("cl-a", "0a1b2c3d")) {
			if cr, ok := o.(*rbacv1.ClusterRole); ok {
				return cr
			}
		}
		t.Fatal("ForgePeeringUserAccess makes no ClusterRole")
		return nil
	}
	for _, tc := range []struct {
		name   string
		change func(*rbacv1.ClusterRole)
		want   bool
	}{
		{"as generated", func(*rbacv1.ClusterRole) {}, true},
		{"another name", func(cr *rbacv1.ClusterRole) { cr.Name = "x" }, false},
		{"other rules", func(cr *rbacv1.ClusterRole) { cr.Rules = nil }, false},
		{"aggregated", func(cr *rbacv1.ClusterRole) { cr.AggregationRule = &rbacv1.AggregationRule{} }, false},
		{"a user of another consumer", func(cr *rbacv1.ClusterRole) { cr.Labels[wire.PeeringUserLabel] = PeeringUserName("cl-b", "00") }, false},
		{"a user with no suffix", func(cr *rbacv1.ClusterRole) { cr.Labels[wire.PeeringUserLabel] = PeeringUserName("cl-a", "") }, false},
		{"another consumer's name", func(cr *rbacv1.ClusterRole) { cr.Labels[wire.RemoteClusterIDLabel] = "cl-b" }, false},
	} {
		cr := real()
		tc.change(cr)
		if got := IsPeeringUserClusterRole(cr); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
