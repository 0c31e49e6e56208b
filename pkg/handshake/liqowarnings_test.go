package handshake

import (
	"strings"
	"testing"
)

// TestLiqoRemedy: what Liqo's tenant controller keeps and says on a Tenant it will not
// complete is turned into the command that removes it.
func TestLiqoRemedy(t *testing.T) {
	const ns, id = "liqo-tenant-cl-c", "cl-c"
	for _, tc := range []struct{ reason, message, want string }{
		{"AuthParamsFailed", `the stored and the provided CSR for cluster cl-c does not match`, "kubectl delete secret -n liqo-tenant-cl-c liqo-remote-certificate"},
		{"SignatureVerificationFailed", `signature verification failed for Tenant "cl-c"`, "kubectl delete tenant -n liqo-tenant-cl-c cl-c"},
		{"NonceNotFound", "multiple nonces", "kubectl get secrets -A -l liqo.io/remote-cluster-id=cl-c,"},
		{"TenantNamespaceCreationFailed", "multiple tenant namespaces found", "kubectl get namespaces -l liqo.io/remote-cluster-id=cl-c"},
		{"AuthParamsFailed", "the API server is down", ""},
	} {
		got := LiqoRemedy(tc.reason, tc.message, ns, id)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.reason, got, tc.want)
		}
	}
}
