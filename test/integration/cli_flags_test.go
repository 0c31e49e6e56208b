package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestConnectionFlagsOnBothSides: the kubectl connection flags reach both clusters of a
// two-cluster command: contexts of one kubeconfig, impersonation, bearer tokens with an
// explicit server, and the request timeout.
func TestConnectionFlagsOnBothSides(t *testing.T) {
	// Serial: it sets KUBECONFIG for the whole process (t.Setenv).
	c, p := cliSites(t)
	ctx := context.Background()
	dir := t.TempDir()
	// A kubeconfig without a usable default: its current context points nowhere.
	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	merged := clientcmdapi.NewConfig()
	for name, path := range map[string]string{"consumer": c.cp.Kubeconfig, "provider": p.cp.Kubeconfig} {
		kc, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err)
		for _, ctxt := range kc.Contexts {
			merged.Clusters[name] = kc.Clusters[ctxt.Cluster]
			merged.AuthInfos[name] = kc.AuthInfos[ctxt.AuthInfo]
			merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		}
	}
	merged.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	merged.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "consumer"}
	merged.CurrentContext = "nowhere"
	both := filepath.Join(dir, "both.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*merged, both))

	t.Run("--context and --remote-context", func(t *testing.T) {
		_, errOut := mustCLI(t, "authenticate", "--kubeconfig", both, "--context", "consumer", "--remote-kubeconfig", both, "--remote-context", "provider")
		assert.Contains(t, errOut, "Identity status is filled")
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	})

	t.Run("--as and --remote-as", func(t *testing.T) {
		_, _, err := runCLI(t, "info", "--kubeconfig", c.cp.Kubeconfig, "--as", "nobody")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `User "nobody"`)
		_, _, err = runCLI(t, pairArgs("authenticate", c, p, "--remote-as", "nobody")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(remote)")
		assert.Contains(t, err.Error(), `User "nobody"`)
	})

	t.Run("--token and --server on both sides", func(t *testing.T) {
		args := []string{"authenticate"}
		for _, side := range []struct {
			prefix string
			s      *site
		}{{"", c}, {"remote-", p}} {
			require.NoError(t, side.s.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: "default"}}))
			require.NoError(t, side.s.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "operator"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "operator", Namespace: "default"}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}))
			// The command's first request may not come before the authorizer knows the binding.
			waitGranted(t, side.s, "system:serviceaccount:default:operator", "", []rbacv1.PolicyRule{rule("", "namespaces", "get")})
			cfg, err := side.s.cp.ServiceAccountConfig(ctx, "default", "operator")
			require.NoError(t, err)
			ca := filepath.Join(dir, side.prefix+"ca.crt")
			require.NoError(t, os.WriteFile(ca, side.s.cp.CA.CertPEM, 0o600))
			args = append(args, "--"+side.prefix+"server", side.s.cp.URL, "--"+side.prefix+"certificate-authority", ca, "--"+side.prefix+"token", cfg.BearerToken)
		}
		_, errOut := mustCLI(t, args...)
		assert.Contains(t, errOut, "Already authenticated", "the same pair, reached with tokens")
	})

	t.Run("--request-timeout and --remote-request-timeout", func(t *testing.T) {
		_, _, err := runCLI(t, pairArgs("authenticate", c, p, "--request-timeout", "1ns")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(local)")
		_, _, err = runCLI(t, pairArgs("authenticate", c, p, "--remote-request-timeout", "1ns")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(remote)")
	})
}
