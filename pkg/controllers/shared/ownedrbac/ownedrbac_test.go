package ownedrbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestOrphanOf: an object nothing controls is an orphan of what was forged only when it
// carries every label forged with it, this project's among them.
func TestOrphanOf(t *testing.T) {
	ours := map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: "cl-a"}
	for _, tc := range []struct {
		name   string
		forged map[string]string
		got    map[string]string
		want   bool
	}{
		{"the same labels", ours, ours, true},
		{"more labels", ours, map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: "cl-a", "extra": "x"}, true},
		{"another cluster", ours, map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: "cl-b"}, false},
		{"not managed by this project", ours, map[string]string{wire.RemoteClusterIDLabel: "cl-a"}, false},
		{"no labels", ours, nil, false},
		{"forged without this project's label", map[string]string{wire.RemoteClusterIDLabel: "cl-a"}, map[string]string{wire.RemoteClusterIDLabel: "cl-a"}, false},
		{"forged with none", nil, ours, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Labels: tc.got}}
			if got := orphanOf(obj, tc.forged); got != tc.want {
				t.Errorf("orphanOf(%v, forged %v) = %v, want %v", tc.got, tc.forged, got, tc.want)
			}
		})
	}
}
