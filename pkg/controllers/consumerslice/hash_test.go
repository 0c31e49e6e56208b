package consumerslice

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestPinnedKubeconfigHash: a cached provider client stands for one kubeconfig checked
// against one CA pin and one proxy pin. A change of any of them, or bytes moved from one
// to the next, is another hash (a new check); nothing pinned and "" (none) decide alike.
func TestPinnedKubeconfigHash(t *testing.T) {
	const fp = "sha256:aa"
	base := pinnedKubeconfigHash([]byte("kubeconfig"), &cluster.TenantRecord{CAFingerprint: fp, ProxyURL: ptr.To("")})
	for _, tc := range []struct {
		name       string
		kubeconfig string
		rec        cluster.TenantRecord
		same       bool
	}{
		{"the same", "kubeconfig", cluster.TenantRecord{CAFingerprint: fp, ProxyURL: ptr.To("")}, true},
		{"no proxy pinned decides as none", "kubeconfig", cluster.TenantRecord{CAFingerprint: fp}, true},
		{"another kubeconfig", "kubeconfig2", cluster.TenantRecord{CAFingerprint: fp, ProxyURL: ptr.To("")}, false},
		{"another CA pin", "kubeconfig", cluster.TenantRecord{CAFingerprint: "sha256:bb", ProxyURL: ptr.To("")}, false},
		{"a proxy pinned", "kubeconfig", cluster.TenantRecord{CAFingerprint: fp, ProxyURL: ptr.To("http://proxy.example.com:3128")}, false},
		{"bytes moved from the kubeconfig to the pin", "kubeconfi", cluster.TenantRecord{CAFingerprint: "g" + fp, ProxyURL: ptr.To("")}, false},
		{"bytes moved from the CA pin to the proxy", "kubeconfig", cluster.TenantRecord{CAFingerprint: "sha256:a", ProxyURL: ptr.To("a")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pinnedKubeconfigHash([]byte(tc.kubeconfig), &tc.rec); (got == base) != tc.same {
				t.Errorf("same hash %v, want %v", got == base, tc.same)
			}
		})
	}
}
