package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cmd/info"
	"github.com/liqo-auth/liqo-auth/pkg/cmd/verify"
	"github.com/liqo-auth/liqo-auth/pkg/testenv"
)

// TestVerifyChecksEveryNamespace (issue 32, item 4): the owner of a namespace other than
// the tenant namespace grants the consumer's user pods and Secrets there. verify, given
// the provider's credentials, fails naming the binding; with the consumer's alone it
// cannot see it and says so (skip), never pass.
func TestVerifyChecksEveryNamespace(t *testing.T) {
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	out, _ := mustCLI(t, pairArgs("verify", consumer, provider, "-o", "json")...)
	_, by := checksOf(t, out)
	assert.Equal(t, verify.ResultPass, by["cl-consumer>cl-provider"][verify.CheckEveryNamespace].Result, by["cl-consumer>cl-provider"][verify.CheckEveryNamespace].Detail)

	// A namespace owner, acting in the namespace it owns and nowhere else.
	require.NoError(t, provider.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
	owner := principal(t, provider, "team-a-owner", "team-a", rule("", "pods", "get", "list"), rule("", "secrets", "get", "list"),
		rule(rbacv1.GroupName, "roles", "create"), rule(rbacv1.GroupName, "rolebindings", "create"))
	require.NoError(t, owner.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leak", Namespace: "team-a"},
		Rules: []rbacv1.PolicyRule{rule("", "pods", "get", "list"), rule("", "secrets", "get", "list")}}))
	require.NoError(t, owner.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leak", Namespace: "team-a"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: consumer.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leak"}}))

	out, _, err := runCLI(t, pairArgs("verify", consumer, provider, "-o", "json")...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cl-consumer on cl-provider: "+verify.CheckEveryNamespace)
	_, by = checksOf(t, out)
	c := by["cl-consumer>cl-provider"][verify.CheckEveryNamespace]
	assert.Equal(t, verify.ResultFail, c.Result)
	assert.Contains(t, c.Detail, `RoleBinding "leak" in namespace "team-a"`)

	out, _, _ = runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "-o", "json")
	_, by = checksOf(t, out)
	c = by["cl-consumer>cl-provider"][verify.CheckEveryNamespace]
	assert.Equal(t, verify.ResultSkip, c.Result, "without the provider's credentials the grant cannot be seen: never a pass")
	assert.Contains(t, c.Detail, "--remote-kubeconfig")
}

// TestReadersReadOnlyTenantNamespaces (issue 32, item 7): whoever may write Identities,
// Secrets or ResourceSlices in a namespace that is no tenant namespace adds no peer to
// info and verify, and makes neither fail; one stderr line counts what was ignored.
func TestReadersReadOnlyTenantNamespaces(t *testing.T) {
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)

	for _, s := range []*site{consumer, provider} {
		require.NoError(t, s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}))
	}
	// On the consumer, an Identity writer of another namespace forges a provider.
	idWriter := principal(t, consumer, "identity-writer", "elsewhere", rule("authentication.liqo.io", "identities", "create"))
	require.NoError(t, idWriter.Create(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName("cl-fake"), Namespace: "elsewhere",
		Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-fake"}},
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-fake", Type: authv1beta1.ControlPlaneIdentityType}}))
	// On the provider, a Secret writer of another namespace forges a half-done handshake.
	secWriter := principal(t, provider, "secret-writer", "elsewhere", rule("", "secrets", "create"))
	require.NoError(t, secWriter.Create(ctx, secret("elsewhere", wire.NonceSecretName,
		map[string]string{wire.RemoteClusterIDLabel: "cl-fake", wire.NonceLabel: "true"}, map[string][]byte{"nonce": []byte("x")})))

	out, errOut := mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "-o", "json")
	r, _ := checksOf(t, out)
	require.Len(t, r.Peers, 1, "only the provider of the designated tenant namespace")
	assert.Equal(t, provider.id, r.Peers[0].Provider)
	assert.Contains(t, errOut, "1 Identities outside the tenant namespaces")

	for _, s := range []*site{consumer, provider} {
		out, errOut := mustCLI(t, "info", "--kubeconfig", s.cp.Kubeconfig, "-o", "json")
		var rep info.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		for _, e := range append(rep.Tenants, rep.Identities...) {
			assert.NotEqual(t, "cl-fake", e.Cluster, "info of %s lists a peer forged in another namespace: %+v", s.id, e)
			assert.NotEqual(t, "elsewhere", e.Namespace)
		}
		assert.Equal(t, 1, strings.Count(errOut, "were ignored"), errOut)
		assert.Contains(t, errOut, fmt.Sprintf("%d objects naming a peer outside", 1))
	}
}

// TestPeerStringsRefusedAtAdmission (issue 32, item 5): the strings a peer writes and
// liqoctl prints (a slice's resource names, a denial's reason and message, an Identity's
// provider namespace) refuse control characters, C1 controls and bidirectional overrides
// at admission, as the weakest principal that writes each; what Liqo writes (CamelCase
// reasons, messages with newlines and accented letters) is still accepted.
func TestPeerStringsRefusedAtAdmission(t *testing.T) {
	cps := testenv.New(t, "admission")
	_, _ = mustCLI(t, "install", "--kubeconfig", cps[0].Kubeconfig, "--cluster-id", "cl-admission")
	s := &site{cp: cps[0], id: "cl-admission", client: newClient(t, cps[0].Config)}
	ctx := context.Background()
	require.NoError(t, s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-ns"}}))
	tenant := principal(t, s, "slice-writer", "tenant-ns", rule("authentication.liqo.io", "resourceslices", "create"),
		rule("authentication.liqo.io", "identities", "create"), rule("authentication.liqo.io", "resourceslices/status", "update"))

	rs := func(name string, res corev1.ResourceList) *authv1beta1.ResourceSlice {
		return &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-ns"}, Spec: authv1beta1.ResourceSliceSpec{Resources: res}}
	}
	for _, bad := range []string{"cpu\u202e", "gpu\u009b31m", "mem\x1b[2J"} {
		err := tenant.Create(ctx, rs("bad", corev1.ResourceList{corev1.ResourceName(bad): resource.MustParse("1")}))
		require.Error(t, err, "%q", bad)
		assert.Contains(t, err.Error(), "resource names are qualified names")
	}
	good := rs("good", corev1.ResourceList{"cpu": resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")})
	require.NoError(t, tenant.Create(ctx, good))

	for _, bad := range []authv1beta1.ResourceSliceCondition{
		{Type: authv1beta1.ResourceSliceConditionAuthentication, Status: authv1beta1.ResourceSliceDenied, Reason: "Denied\u202eyppah"},
		{Type: authv1beta1.ResourceSliceConditionAuthentication, Status: authv1beta1.ResourceSliceDenied, Reason: "Denied", Message: "see \u009b31mred"},
		{Type: authv1beta1.ResourceSliceConditionAuthentication, Status: authv1beta1.ResourceSliceDenied, Reason: "Denied", Message: "bidi \u2066hidden"},
	} {
		cp := good.DeepCopy()
		cp.Status.Conditions = []authv1beta1.ResourceSliceCondition{bad}
		require.Error(t, tenant.Status().Update(ctx, cp), "%+v", bad)
	}
	cp := good.DeepCopy()
	cp.Status.Conditions = []authv1beta1.ResourceSliceCondition{{Type: authv1beta1.ResourceSliceConditionAuthentication, Status: authv1beta1.ResourceSliceAccepted,
		Reason: authv1beta1.ReasonSliceAuthenticationAccepted, Message: "accepté:\n\tcpu=1 — ok"}}
	require.NoError(t, tenant.Status().Update(ctx, cp), "what Liqo writes is accepted")

	err := tenant.Create(ctx, &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Name: "id", Namespace: "tenant-ns"},
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-p", Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To("liqo-tenant\u202e")}})
	require.Error(t, err)
}
