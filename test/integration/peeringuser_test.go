package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestPeeringUser: the provider's administrator generates a peering user for one
// consumer; the consumer's administrator, holding no other credential of the provider,
// authenticates and unauthenticates with it; it may do exactly its job and nothing else;
// deleting it leaves it authorizing nothing.
func TestPeeringUser(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	dir := t.TempDir()

	out, errOut := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id, "--ttl", "2h")
	assert.Contains(t, errOut, "Peering user "+wire.PeeringUserPrefix+c.id+"-")
	assert.Contains(t, errOut, "liqoctl authenticate --remote-kubeconfig")
	pu := filepath.Join(dir, "peering-user.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	info, err := authn.ReadKubeconfig([]byte(out))
	require.NoError(t, err, "a kubeconfig with embedded certificate data only")
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	user := cert.Subject.CommonName
	assert.True(t, strings.HasPrefix(user, wire.PeeringUserPrefix+c.id+"-"))
	assert.Equal(t, []string{wire.UserGroup}, cert.Subject.Organization)
	assert.WithinDuration(t, time.Now().Add(2*time.Hour), cert.NotAfter, 5*time.Minute, "--ttl bounds the certificate")
	clusterKey, err := cluster.GetClusterKey(ctx, p.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	assert.False(t, authn.PublicKeysEqual(cert.PublicKey, clusterKey.Public()), "a fresh key, never the cluster key")

	_, _, err = runCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	require.Error(t, err, "one live peering user per consumer")
	assert.Contains(t, err.Error(), "liqoctl delete peering-user --consumer-cluster-id "+c.id)
	_, _, err = runCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id, "--ttl", "720h")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--ttl must be between")
	out, _ = mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, out, user, "info lists peering users")

	tn := wire.TenantNamespaceName(c.id)
	t.Run("permissions are exactly its job", func(t *testing.T) {
		groups := []string{wire.UserGroup, "system:authenticated"}
		for _, tc := range []struct {
			verb, group, resource, ns, name string
			allowed                         bool
		}{
			{"create", "", "secrets", tn, "", true},
			{"get", "", "secrets", tn, wire.NonceSecretName, true},
			{"delete", "", "secrets", tn, wire.NonceSecretName, true},
			{"get", "", "secrets", tn, "other", false},
			{"list", "", "secrets", tn, "", false},
			{"get", "", "secrets", wire.DefaultLiqoNamespace, wire.KeysSecretName, false},
			{"patch", "authentication.liqo.io", "tenants", tn, c.id, true},
			{"get", "authentication.liqo.io", "tenants", tn, "cl-someone-else", false},
			{"get", "authentication.liqo.io", "tenants", wire.TenantNamespaceName("cl-someone-else"), "cl-someone-else", false},
			{"update", "authentication.liqo.io", "tenants", tn, c.id, true},
			{"update", "authentication.liqo.io", "tenants/status", tn, c.id, false},
			{"get", "", "configmaps", wire.DefaultLiqoNamespace, wire.ClusterIDConfigMapName, true},
			{"get", "", "configmaps", wire.DefaultLiqoNamespace, wire.TenantRecordName(c.id), true},
			{"get", "", "configmaps", wire.DefaultLiqoNamespace, wire.TenantRecordName("cl-someone-else"), false},
			{"update", "", "configmaps", wire.DefaultLiqoNamespace, wire.TenantRecordName(c.id), false},
			{"get", "coordination.k8s.io", "leases", wire.DefaultLiqoNamespace, wire.ManagerName, true},
			{"get", "", "namespaces", "", tn, true},
			{"get", "", "namespaces", "", "default", false},
			{"list", "", "namespaces", "", "", false},
			{"create", "certificates.k8s.io", "certificatesigningrequests", "", "", false},
			{"list", "certificates.k8s.io", "certificatesigningrequests", "", "", false},
			{"create", "rbac.authorization.k8s.io", "rolebindings", tn, "", false},
			{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", false},
			{"create", "", "pods", tn, "", false},
			{"list", "authentication.liqo.io", "identities", "", "", false},
			// Retiring itself: its own objects, by name only.
			{"delete", "rbac.authorization.k8s.io", "rolebindings", tn, wire.PeeringUserClusterObjectName(c.id), true},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", wire.DefaultLiqoNamespace, wire.PeeringUserClusterObjectName(c.id), true},
			{"delete", "rbac.authorization.k8s.io", "roles", tn, wire.PeeringUserClusterObjectName(c.id), true},
			{"delete", "rbac.authorization.k8s.io", "roles", wire.DefaultLiqoNamespace, wire.PeeringUserClusterObjectName(c.id), true},
			{"delete", "rbac.authorization.k8s.io", "clusterrolebindings", "", wire.PeeringUserClusterObjectName(c.id), true},
			{"delete", "rbac.authorization.k8s.io", "clusterroles", "", wire.PeeringUserClusterObjectName(c.id), false},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", "default", wire.PeeringUserClusterObjectName(c.id), false},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", tn, wire.ManagerName, false},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", tn, wire.TenantReaderName, false},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", wire.DefaultLiqoNamespace, wire.PeeringUserClusterObjectName("cl-someone-else"), false},
			{"delete", "rbac.authorization.k8s.io", "clusterrolebindings", "", wire.PeeringUserClusterObjectName("cl-someone-else"), false},
			{"delete", "rbac.authorization.k8s.io", "clusterrolebindings", "", wire.ManagerName, false},
			{"list", "rbac.authorization.k8s.io", "rolebindings", tn, "", false},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Group: tc.group, Resource: strings.Split(tc.resource, "/")[0],
					Subresource: strings.TrimPrefix(strings.TrimPrefix(tc.resource, strings.Split(tc.resource, "/")[0]), "/"), Namespace: tc.ns, Name: tc.name}}}
			require.NoError(t, p.client.Create(ctx, sar))
			assert.Equal(t, tc.allowed, sar.Status.Allowed, "can-i %s %s %s in %q as the peering user", tc.verb, tc.resource, tc.name, tc.ns)
		}
		// What RBAC cannot restrict to a name, the admission policy does.
		peer := newClient(t, restConfigFromKubeconfig(t, []byte(mustRead(t, pu))))
		err := peer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "smuggled", Labels: map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: c.id}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no Secret but the nonce")
		err = peer.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}})
		assert.True(t, apierrors.IsForbidden(err), "no CSR: %v", err)
		err = peer.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}})
		assert.True(t, apierrors.IsForbidden(err), "no RBAC: %v", err)
	})

	t.Run("authenticate and unauthenticate with it", func(t *testing.T) {
		_, errOut := mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
		assertInOrder(t, errOut, publishedSteps)
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
		_, errOut = mustCLI(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
		assert.Contains(t, errOut, "the consumer's own certificate asks instead")
		assert.Contains(t, errOut, "Access revoked: verified")
		var tenant authv1beta1.Tenant
		assert.True(t, apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: c.id}, &tenant)))
	})

	t.Run("it cannot authenticate another cluster", func(t *testing.T) {
		other := testenv.New(t, "other-consumer")[0]
		mustCLI(t, "install", "--kubeconfig", other.Kubeconfig, "--cluster-id", "cl-other")
		_, _, err := runCLI(t, "authenticate", "--kubeconfig", other.Kubeconfig, "--remote-kubeconfig", pu)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(remote)")
		assert.Contains(t, err.Error(), "forbidden")
		var tenants authv1beta1.TenantList
		require.NoError(t, p.client.List(ctx, &tenants))
		for _, tn := range tenants.Items {
			assert.NotEqual(t, "cl-other", string(tn.Spec.ClusterID), "no Tenant for another cluster")
		}
	})

	t.Run("delete proves it authorizes nothing", func(t *testing.T) {
		_, errOut := mustCLI(t, "delete", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		assert.Contains(t, errOut, "Access of peering user "+user+" revoked: verified")
		assert.Contains(t, errOut, "never revives it")
		peer := newClient(t, restConfigFromKubeconfig(t, []byte(mustRead(t, pu))))
		var cm corev1.ConfigMap
		err := peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ClusterIDConfigMapName}, &cm)
		assert.True(t, apierrors.IsForbidden(err), "the old certificate authorizes nothing: %v", err)
		// A new peering user for the same consumer gets another name: the old one stays dead.
		out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		fresh, err := clientcmd.Load([]byte(out))
		require.NoError(t, err)
		for name := range fresh.AuthInfos {
			assert.NotEqual(t, user, name)
		}
		err = peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ClusterIDConfigMapName}, &cm)
		assert.True(t, apierrors.IsForbidden(err), "still nothing: %v", err)
	})

	t.Run("an expired peering user is replaced", func(t *testing.T) {
		// Certificates of the CSR API live at least ten minutes: expiry is recorded, and
		// the API server refuses the certificate after it; here the record says so.
		// The expiry is read from the tenant record, where the peering user is recorded.
		require.NoError(t, cluster.UpdateTenantRecord(ctx, p.client, p.client, wire.DefaultLiqoNamespace, c.id, false, func(rec *cluster.TenantRecord) error {
			rec.PeeringUser.NotAfter = time.Now().Add(-time.Minute).UTC()
			return nil
		}))
		var crbs rbacv1.ClusterRoleBindingList
		_, errOut := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		assert.Contains(t, errOut, "Replacing peering user")
		require.NoError(t, p.client.List(ctx, &crbs, client.HasLabels{wire.PeeringUserLabel}, client.MatchingLabels{wire.RemoteClusterIDLabel: c.id}))
		assert.Len(t, crbs.Items, 1, "one peering user per consumer")
	})
}

// TestPeeringUserNeedsTheManager: without a liqo-auth-manager on the provider, a peering
// user cannot run the provider's controllers; authenticate says so and what to do.
func TestPeeringUserNeedsTheManager(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	_, _, err := runCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(remote)")
	assert.Contains(t, err.Error(), "no liqo-auth-manager runs in this cluster")
	assert.Contains(t, err.Error(), "liqoctl install --with-manager")

	// Uninstalling would remove the admission policy that keeps it to the nonce, while
	// its grants stay: refused, or, forced, the peering user goes first, with its proof.
	_, _, err = runCLI(t, "uninstall", "--kubeconfig", p.cp.Kubeconfig)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "peering users exist")
	_, errOut, err := runCLI(t, "uninstall", "--kubeconfig", p.cp.Kubeconfig, "--force", "--skip-confirm")
	require.NoError(t, err, errOut)
	assert.Contains(t, errOut, "revoked: verified")
	var crbs rbacv1.ClusterRoleBindingList
	require.NoError(t, p.client.List(context.Background(), &crbs, client.HasLabels{wire.PeeringUserLabel}))
	assert.Empty(t, crbs.Items, "no peering user outlives the uninstall")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestPeeringUsersOfTwoConsumers: peering users generated for two consumers of one
// provider each keep their own roles and bindings: the second never overwrites the first's
// subjects, nor the by-name rule for its tenant record, and both handshakes succeed.
func TestPeeringUsersOfTwoConsumers(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	other := &site{cp: testenv.New(t, "second-consumer")[0], id: "cl-second"}
	other.client = newClient(t, other.cp.Config)
	mustCLI(t, "install", "--kubeconfig", other.cp.Kubeconfig, "--cluster-id", other.id)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	dir := t.TempDir()
	kubeconfigs := map[string]string{}
	for _, s := range []*site{c, other} {
		out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", s.id)
		kubeconfigs[s.id] = filepath.Join(dir, s.id+".kubeconfig")
		require.NoError(t, os.WriteFile(kubeconfigs[s.id], []byte(out), 0o600))
	}
	for _, s := range []*site{c, other} {
		peer := newClient(t, restConfigFromKubeconfig(t, []byte(mustRead(t, kubeconfigs[s.id]))))
		for _, name := range []string{wire.ClusterIDConfigMapName, wire.TenantRecordName(s.id)} {
			assert.NoError(t, peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: name}, &corev1.ConfigMap{}),
				"the peering user of %s reads %s", s.id, name)
		}
		var rbs rbacv1.RoleBindingList
		require.NoError(t, p.client.List(ctx, &rbs, client.MatchingLabels{wire.RemoteClusterIDLabel: s.id}, client.HasLabels{wire.PeeringUserLabel}))
		for _, rb := range rbs.Items {
			assert.Equal(t, wire.PeeringUserClusterObjectName(s.id), rb.Name, "the peering user's bindings are named for its consumer")
		}
		assert.Len(t, rbs.Items, 2, "a binding in the tenant namespace and one in the Liqo namespace")
	}
	for _, s := range []*site{c, other} {
		_, errOut := mustCLI(t, "authenticate", "--kubeconfig", s.cp.Kubeconfig, "--remote-kubeconfig", kubeconfigs[s.id])
		assertInOrder(t, errOut, publishedSteps)
	}
	// Removing one removes its own only: the other still reads what it needs.
	mustCLI(t, "delete", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	peer := newClient(t, restConfigFromKubeconfig(t, []byte(mustRead(t, kubeconfigs[other.id]))))
	assert.NoError(t, peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(other.id)}, &corev1.ConfigMap{}))
}
