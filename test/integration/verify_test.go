package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cmd/verify"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// checksOf decodes liqoctl verify -o json into check results by peer and name.
func checksOf(t *testing.T, out string) (verify.Report, map[string]map[string]verify.Check) {
	t.Helper()
	var r verify.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	by := map[string]map[string]verify.Check{}
	for _, p := range r.Peers {
		by[p.Consumer+">"+p.Provider] = map[string]verify.Check{}
		for _, c := range p.Checks {
			by[p.Consumer+">"+p.Provider][c.Name] = c
		}
	}
	return r, by
}

// TestVerify: after a handshake every check passes, in both directions once both exist;
// a permission the provider's administrator adds or removes, in the tenant namespace or
// cluster-wide, makes verify fail naming it, with a non-zero exit.
func TestVerify(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()

	_, _, err := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds no identity on any provider")

	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	out, _ := mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig)
	assert.Regexp(t, `cl-consumer\s+cl-provider\s+permissions\s+pass`, out)

	out, _ = mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "-o", "json")
	r, by := checksOf(t, out)
	require.Len(t, r.Peers, 1)
	p := r.Peers[0]
	require.NotNil(t, p.Expires)
	require.NotNil(t, p.RenewsAt)
	require.NotNil(t, p.ClockSkewSeconds)
	assert.InDelta(t, 0, *p.ClockSkewSeconds, 2, "one machine, one clock")
	for _, name := range []string{"identity", "certificate-key", "ca-pin", "expiry", "authentication", "permissions", "cluster-wide", "clock-skew"} {
		assert.Equal(t, verify.ResultPass, by["cl-consumer>cl-provider"][name].Result, "%s: %s", name, by["cl-consumer>cl-provider"][name].Detail)
	}

	// The other direction, once the provider is a consumer of the consumer too.
	mustCLI(t, pairArgs("authenticate", provider, consumer)...)
	out, _ = mustCLI(t, pairArgs("verify", consumer, provider, "-o", "json")...)
	r, by = checksOf(t, out)
	assert.Len(t, r.Peers, 2)
	assert.Equal(t, verify.ResultPass, by["cl-provider>cl-consumer"]["permissions"].Result)

	// The provider's administrator grants one permission more in the tenant namespace.
	pTN := wire.TenantNamespaceName(consumer.id)
	require.NoError(t, provider.client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: pTN},
		Rules: []rbacv1.PolicyRule{rule("", "configmaps", "get")}}))
	require.NoError(t, provider.client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: pTN},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: consumer.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "more"}}))
	out, _, err = runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "-o", "json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cl-consumer on cl-provider: permissions")
	_, by = checksOf(t, out)
	assert.Equal(t, verify.ResultFail, by["cl-consumer>cl-provider"]["permissions"].Result)
	assert.Contains(t, by["cl-consumer>cl-provider"]["permissions"].Detail, "extra /configmaps:get")

	// ... and one cluster-wide.
	require.NoError(t, provider.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "verify-view"},
		Rules: []rbacv1.PolicyRule{rule("", "pods", "list")}}))
	require.NoError(t, provider.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "verify-view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: wire.UserGroup}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "verify-view"}}))
	// RBAC's authorizer sees a new binding once its informer has: verify is run until then.
	eventuallyNoError(t, ctx, "verify names the cluster-wide grant", func(context.Context) error {
		_, _, runCLIErr := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
		if runCLIErr == nil || !strings.Contains(runCLIErr.Error(), "cl-consumer on cl-provider: cluster-wide") {
			return fmt.Errorf("not yet: %v", runCLIErr)
		}
		return nil
	})

	// Removing the control-plane binding is a missing permission.
	require.NoError(t, provider.client.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "verify-view"}}))
	require.NoError(t, provider.client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "more", Namespace: pTN}}))
	cp := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.ControlPlaneBindingName, Namespace: pTN}}
	require.NoError(t, provider.client.Delete(ctx, cp))
	// No manager runs on the provider: nothing puts the binding back.
	eventuallyNoError(t, ctx, "verify names the missing permissions, and only those", func(context.Context) error {
		out, _, runCLIErr := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "-o", "json")
		if runCLIErr == nil {
			return errors.New("verify passed")
		}
		_, by := checksOf(t, out)
		c := by["cl-consumer>cl-provider"]["permissions"]
		if !strings.Contains(c.Detail, ", missing authentication.liqo.io/") || !strings.Contains(c.Detail, "authentication.liqo.io/resourceslices:create") || !strings.HasSuffix(c.Detail, "extra none") ||
			by["cl-consumer>cl-provider"]["cluster-wide"].Result != verify.ResultPass {
			return fmt.Errorf("not yet: %+v", by["cl-consumer>cl-provider"])
		}
		return nil
	})

	_, _, err = runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", "cl-nobody")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cl-consumer on cl-nobody: identity")
}

// TestVerifyTrustsOnlyThePinnedCA: whoever may write Identities in the consumer's tenant
// namespace points the Identity at another API server, with that server's CA. verify
// must not report the peering healthy from what that server answers.
func TestVerifyTrustsOnlyThePinnedCA(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	cTN := wire.TenantNamespaceName(provider.id)
	writer := principal(t, consumer, "identity-writer", cTN, rule("authentication.liqo.io", "identities", "get", "update", "patch"))
	key := client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(provider.id)}
	eventuallyNoError(t, ctx, "the Identity pointed elsewhere, as an Identity writer", func(ctx context.Context) error {
		var id authv1beta1.Identity
		if err := writer.Get(ctx, key, &id); err != nil {
			return err
		}
		id.Spec.AuthParams.APIServer, id.Spec.AuthParams.CA = consumer.cp.Config.Host, consumer.cp.Config.CAData
		return writer.Update(ctx, &id)
	})
	out, _, err := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "-o", "json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cl-consumer on cl-provider: ca-pin")
	_, by := checksOf(t, out)
	checks := by["cl-consumer>cl-provider"]
	assert.Equal(t, verify.ResultFail, checks["ca-pin"].Result)
	for _, name := range []string{"authentication", "permissions", "cluster-wide"} {
		assert.NotEqual(t, verify.ResultPass, checks[name].Result, "%s passed through a server the pin does not vouch for: %s", name, checks[name].Detail)
	}
}
