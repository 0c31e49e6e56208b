package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// principal is a client acting as a user who holds exactly the rules granted to it:
// the API server sees the administrator impersonating that user (kubectl --as).
func principal(t testing.TB, s *site, user, ns string, rules ...rbacv1.PolicyRule) client.WithWatch {
	t.Helper()
	ctx := context.Background()
	name := "test-" + user
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	if ns == "" {
		require.NoError(t, s.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}))
		require.NoError(t, s.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}))
	} else {
		require.NoError(t, s.client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}))
		require.NoError(t, s.client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}))
	}
	waitGranted(t, s, user, ns, rules)
	cfg := rest.CopyConfig(s.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return newClient(t, cfg)
}

// waitGranted waits until the API server's authorizer, which follows RBAC through its
// informers, grants user the first verb of each rule (in ns, "" cluster-wide): a
// principal's first request, made the moment its binding is created, was refused on a
// loaded machine (TestAttack47TenantDeletedWhileAccessIsGranted: "tenant-writer cannot
// create resource tenants"), which would read as an attack refused.
func waitGranted(t testing.TB, s *site, user, ns string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		spec := authorizationv1.SubjectAccessReviewSpec{User: user}
		switch {
		case len(r.Verbs) == 0:
			continue
		case len(r.NonResourceURLs) > 0:
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
		case len(r.APIGroups) > 0 && len(r.Resources) > 0:
			res := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0]}
			res.Resource, res.Subresource, _ = strings.Cut(r.Resources[0], "/")
			if len(r.ResourceNames) > 0 {
				res.Name = r.ResourceNames[0]
			}
			spec.ResourceAttributes = res
		default:
			continue
		}
		eventually(t, 20*time.Second, fmt.Sprintf("%s granted %v", user, r), func(ctx context.Context) (bool, error) {
			sar := &authorizationv1.SubjectAccessReview{Spec: spec}
			if err := s.client.Create(ctx, sar); err != nil {
				return false, err
			}
			return sar.Status.Allowed, nil
		})
	}
}

// tenantSpecWriter is a Tenant writer of namespace ns on s (tenants get, update): it may
// rewrite a Tenant's spec, which the acceptance seal covers except spec.proxyURL.
func tenantSpecWriter(t testing.TB, s *site, ns string) client.WithWatch {
	t.Helper()
	return principal(t, s, "tenant-writer", ns, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "update"))
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// waitCondition waits until condition typ of the Tenant has status want and reason, and
// returns its message.
func waitTenantCondition(t *testing.T, p *site, key client.ObjectKey, typ string, want metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	eventually(t, 20*time.Second, "Tenant "+key.String()+" condition "+typ+"="+string(want)+" "+reason, func(ctx context.Context) (bool, error) {
		var got authv1beta1.Tenant
		if err := p.client.Get(ctx, key, &got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil {
			return false, nil
		}
		msg = c.Message
		return c.Status == want && c.Reason == reason, nil
	})
	return msg
}

// waitEvent waits for a Warning Event with reason about object name in namespace ns.
func waitEvent(t *testing.T, s *site, ns, name, reason string) {
	t.Helper()
	eventually(t, 20*time.Second, "a Warning Event "+reason+" about "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		return hasEvent(t, s, ns, name, reason), nil
	})
}

// assertNoCSRApproved checks that no CertificateSigningRequest for user id was approved
// or issued.
func assertNoCSRApproved(t *testing.T, p *site, id string) {
	t.Helper()
	var csrs certificatesv1.CertificateSigningRequestList
	require.NoError(t, p.client.List(context.Background(), &csrs))
	for _, c := range csrs.Items {
		if c.Labels[wire.RemoteClusterIDLabel] != id {
			continue
		}
		approved, _, _ := csrConditions(&c)
		assert.False(t, approved, "CSR %s (requested by %s) must not be approved", c.Name, c.Spec.Username)
		assert.Empty(t, c.Status.Certificate, "CSR %s must hold no certificate", c.Name)
	}
}

func csrConditions(c *certificatesv1.CertificateSigningRequest) (approved, denied, failed bool) {
	a, d, f := issuer.CSRState(c)
	return a != nil, d != nil, f != nil
}

// honestHandshake runs an honest consumer a (key material only) against the provider
// through objects, and waits for its certificate.
func honestHandshake(t *testing.T, p *site, a *attacker) *authv1beta1.Tenant {
	t.Helper()
	tn, nonce := freshNonce(t, p, a.id)
	tenant := a.honestTenant(t, tn, nonce)
	require.NoError(t, p.client.Create(context.Background(), tenant))
	key := client.ObjectKeyFromObject(tenant)
	waitTenantCondition(t, p, key, authv1beta1.ConditionReady, metav1.ConditionTrue, "Ready")
	got := &authv1beta1.Tenant{}
	require.NoError(t, p.client.Get(context.Background(), key, got))
	return got
}

// rewrite reads the object at key as writer, changes it and writes it back (its status,
// with status), again on a conflict: as a principal edits what the controllers write too.
// It returns the object as written.
func rewrite[T any, PT interface {
	*T
	client.Object
}](t testing.TB, writer client.Client, key client.ObjectKey, status bool, change func(PT)) PT {
	t.Helper()
	ctx := context.Background()
	obj := PT(new(T))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := writer.Get(ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		if status {
			return writer.Status().Update(ctx, obj)
		}
		return writer.Update(ctx, obj)
	}))
	return obj
}

// grantLeftBehind is the provider's administrator granting user more than a peering knows
// of (ClusterRoleBinding "left-behind": resourceslices get, cluster-wide), which
// unauthenticate's proof must find; it returns once the API server's authorizer grants it,
// so that a proof made at once cannot miss it for RBAC's informers alone.
func grantLeftBehind(t testing.TB, p *site, user string) {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{rule("authentication.liqo.io", "resourceslices", "get")}
	require.NoError(t, p.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "left-behind"}, Rules: rules}))
	require.NoError(t, p.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "left-behind"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "left-behind"}}))
	waitGranted(t, p, user, "", rules)
}
