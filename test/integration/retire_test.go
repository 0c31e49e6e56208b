package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// recordReport keeps what a side reports, for assertions.
type recordReport struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordReport) Info(format string, args ...any) {
	r.add("INFO " + fmt.Sprintf(format, args...))
}
func (r *recordReport) Warn(format string, args ...any) {
	r.add("WARN " + fmt.Sprintf(format, args...))
}
func (r *recordReport) add(l string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, l)
}
func (r *recordReport) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// peeringUserSide is a provider Side holding the peering user's kubeconfig only.
func peeringUserSide(t *testing.T, kubeconfig string) (*handshake.Side, *recordReport) {
	t.Helper()
	cfg := restConfigFromKubeconfig(t, []byte(mustRead(t, kubeconfig)))
	rep := &recordReport{}
	s := &handshake.Side{Scope: handshake.Remote, Client: newClient(t, cfg), Config: cfg, Namespace: wire.DefaultLiqoNamespace, Report: rep}
	s.DetectPeeringUser()
	require.NotEmpty(t, s.PeeringUser())
	return s, rep
}

// peeringUserOf is the user name of a peering user's kubeconfig.
func peeringUserOf(t *testing.T, kubeconfig string) string {
	t.Helper()
	info, err := authn.ReadKubeconfig([]byte(mustRead(t, kubeconfig)))
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	return cert.Subject.CommonName
}

// TestPeeringUserRetires: a peering user is a single-use bootstrap credential. Acting with
// its real certificate, it may delete its own bindings and Roles only (never another
// consumer's, nor any binding not its own); authenticate --retire-peering-user retires it
// once the Identity is ready, leaving only its ClusterRole, unbound, and proving with its
// own SelfSubjectAccessReviews that it authorizes nothing; each of its former actions is
// then refused; retiring again proves again. The provider sees it retired: info says so,
// generate peering-user replaces it, delete peering-user forgets it.
func TestPeeringUserRetires(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	dir := t.TempDir()
	const second = "cl-second"
	kubeconfigs := map[string]string{}
	for _, id := range []string{c.id, second} {
		out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", id)
		kubeconfigs[id] = filepath.Join(dir, id+".kubeconfig")
		require.NoError(t, os.WriteFile(kubeconfigs[id], []byte(out), 0o600))
	}
	pu := kubeconfigs[c.id]
	user := peeringUserOf(t, pu)
	peer := newClient(t, restConfigFromKubeconfig(t, []byte(mustRead(t, pu))))
	tn, secondTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(second)
	own, others := wire.PeeringUserClusterObjectName(c.id), wire.PeeringUserClusterObjectName(second)

	t.Run("it can delete nothing but its own", func(t *testing.T) {
		for _, obj := range []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metaOf(secondTN, others)},
			&rbacv1.Role{ObjectMeta: metaOf(secondTN, others)},
			&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, others)},
			&rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, others)},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: others}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: others}},
			&rbacv1.RoleBinding{ObjectMeta: metaOf(tn, wire.ManagerName)},
			&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.ManagerName)},
			&rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.ManagerName)},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: own}},
			// Its own names in a namespace that is not its consumer's, for bindings.
			&rbacv1.RoleBinding{ObjectMeta: metaOf(secondTN, own)},
			&rbacv1.RoleBinding{ObjectMeta: metaOf("default", own)},
		} {
			err := peer.Delete(ctx, obj)
			assert.True(t, apierrors.IsForbidden(err), "the peering user of %s deletes %T %s/%s: %v", c.id, obj, obj.GetNamespace(), obj.GetName(), err)
		}
		for _, obj := range []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metaOf(secondTN, others)},
			&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, others)},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: others}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName}},
		} {
			assert.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(obj), obj), "still there")
		}
	})

	t.Run("authenticate retires it once the Identity is ready", func(t *testing.T) {
		_, errOut := mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu, "--retire-peering-user")
		assertInOrder(t, errOut, publishedSteps)
		assert.Regexp(t, `INFO \(remote\) Peering user `+user+` retired: verified with its own certificate, its certificate stays cryptographically valid until \S+ but authorizes nothing`, errOut)
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
		for _, obj := range []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metaOf(tn, own)}, &rbacv1.Role{ObjectMeta: metaOf(tn, own)},
			&rbacv1.RoleBinding{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, own)}, &rbacv1.Role{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, own)},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: own}},
		} {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			assert.True(t, apierrors.IsNotFound(err), "%T %s/%s is gone: %v", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		assert.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: own}, &rbacv1.ClusterRole{}), "the one object left: its ClusterRole, unbound")
		// The other consumer's peering user is untouched.
		assert.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: others}, &rbacv1.ClusterRoleBinding{}))
	})

	t.Run("every former action is refused", func(t *testing.T) {
		for name, do := range map[string]func() error{
			"read the cluster ID": func() error {
				return peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ClusterIDConfigMapName}, &corev1.ConfigMap{})
			},
			"read its tenant record": func() error {
				return peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(c.id)}, &corev1.ConfigMap{})
			},
			"read the Tenant": func() error { return peer.Get(ctx, client.ObjectKey{Namespace: tn, Name: c.id}, &authv1beta1.Tenant{}) },
			"delete the Tenant": func() error {
				return peer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(tn, c.id)})
			},
			"create a nonce": func() error {
				return peer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.NonceSecretName,
					Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: c.id}}})
			},
			"read the tenant namespace": func() error { return peer.Get(ctx, client.ObjectKey{Name: tn}, &corev1.Namespace{}) },
			"delete its ClusterRole":    func() error { return peer.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: own}}) },
		} {
			err := do()
			assert.True(t, apierrors.IsForbidden(err), "the retired peering user may not %s: %v", name, err)
		}
		// Its own reviews say the same of every permission it was granted.
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: tn, Verb: "patch", Group: authv1beta1.GroupVersion.Group, Resource: "tenants", Name: c.id}}}
		require.NoError(t, peer.Create(ctx, review))
		assert.False(t, review.Status.Allowed)
	})

	t.Run("retiring again proves again", func(t *testing.T) {
		s, rep := peeringUserSide(t, pu)
		require.NoError(t, handshake.RetirePeeringUser(ctx, s))
		assert.Contains(t, rep.String(), "had no binding left to delete")
		assert.Contains(t, rep.String(), "Peering user "+user+" retired: verified")
	})

	t.Run("not a peering user", func(t *testing.T) {
		s := &handshake.Side{Scope: handshake.Remote, Client: p.client, Config: p.cp.Config, Namespace: wire.DefaultLiqoNamespace, Report: discardReport{}}
		s.DetectPeeringUser()
		err := handshake.RetirePeeringUser(ctx, s)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "(remote) these credentials are not a peering user's")
		_, _, err = runCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--retire-peering-user")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no peering user's credentials")
	})

	t.Run("the provider sees it retired", func(t *testing.T) {
		out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
		assert.Regexp(t, user+`\s+\S+\s+retired`, out)
		assert.NotRegexp(t, wire.PeeringUserPrefix+second+`-\S+\s+\S+\s+retired`, out, "the other one is live")
		// generate replaces it, without the "exists" error, and removes what it left.
		out, errOut := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		assert.Contains(t, errOut, "Replacing peering user "+user+", retired")
		fresh := filepath.Join(dir, "fresh.kubeconfig")
		require.NoError(t, os.WriteFile(fresh, []byte(out), 0o600))
		var cr rbacv1.ClusterRole
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: own}, &cr))
		assert.Equal(t, peeringUserOf(t, fresh), cr.Labels[wire.PeeringUserLabel], "the leftover ClusterRole is the new peering user's now")
		// A live one is still refused.
		_, _, err := runCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), handshake.ErrPeeringUserExists.Error())

		// The new one retires by itself (no handshake needed); delete peering-user then
		// proves it and forgets it.
		s, _ := peeringUserSide(t, fresh)
		require.NoError(t, handshake.RetirePeeringUser(ctx, s))
		_, errOut = mustCLI(t, "delete", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		assert.Contains(t, errOut, "revoked: verified")
		err = p.client.Get(ctx, client.ObjectKey{Name: own}, &cr)
		assert.True(t, apierrors.IsNotFound(err), "its ClusterRole goes with it: %v", err)
		out, _ = mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
		assert.NotContains(t, out, wire.PeeringUserPrefix+c.id+"-", "forgotten")
		assert.Contains(t, out, wire.PeeringUserPrefix+second+"-")
	})
}
