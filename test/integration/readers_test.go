package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/internal/cmd/info"
	"github.com/liqo-auth/liqo-auth/internal/cmd/verify"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestVerifyChecksEveryNamespace (issue 32, item 4): the owner of a namespace other than
// the tenant namespace grants the consumer's user pods and Secrets there. verify, given
// the provider's credentials, fails naming the binding; with the consumer's alone it
// cannot see it and says so (skip), never pass.
func TestVerifyChecksEveryNamespace(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestReadersSayWhatIsMissing (issue 38, items 4b, 4c, 4e, 8, 9): an Identity without its
// kubeconfig Secret fails verify and is not Valid in info; a manager's Lease that went
// stale is named with its time by both; info shows the manager's Deployment readiness and
// the CA fingerprint consumers pin; a permissions cell lists a summary, not every item.
func TestReadersSayWhatIsMissing(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)

	// The state a manual flow leaves when no consumer controller runs: no kubeconfig Secret.
	cTN := wire.TenantNamespaceName(provider.id)
	require.NoError(t, consumer.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.KubeconfigSecretName(wire.IdentityName(provider.id))}}))
	out, _, err := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "-o", "json")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cl-consumer on cl-provider: "+verify.CheckKubeconfig)
	_, by := checksOf(t, out)
	assert.Equal(t, verify.ResultFail, by["cl-consumer>cl-provider"][verify.CheckKubeconfig].Result)
	assert.Contains(t, by["cl-consumer>cl-provider"][verify.CheckKubeconfig].Detail, "liqo-auth-manager")
	out, _ = mustCLI(t, "info", "--kubeconfig", consumer.cp.Kubeconfig, "-o", "json")
	var rep info.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Identities, 1)
	assert.NotEqual(t, "Valid", rep.Identities[0].State, "no kubeconfig Secret: not Valid")
	assert.False(t, rep.Identities[0].Ready)
	table, _ := mustCLI(t, "info", "--kubeconfig", consumer.cp.Kubeconfig)
	assert.Contains(t, table, "no kubeconfig Secret "+cTN)

	// A manager held the provider's Lease and stopped renewing it ten minutes ago.
	renewed := metav1.NewMicroTime(time.Now().Add(-10 * time.Minute))
	require.NoError(t, provider.client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.ManagerName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("manager-1"), RenewTime: &renewed, LeaseDurationSeconds: ptr.To[int32](15)}}))
	// ... and its Deployment has no ready replica.
	labels := map[string]string{"app": "m"}
	require.NoError(t, provider.client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.ManagerName},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "m", Image: "none.invalid/m"}}}}}}))
	out, errOut := mustCLI(t, "info", "--kubeconfig", provider.cp.Kubeconfig, "-o", "json")
	rep = info.Report{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.NotNil(t, rep.Manager.StaleSince)
	assert.WithinDuration(t, renewed.Add(15*time.Second), *rep.Manager.StaleSince, time.Second)
	assert.Contains(t, errOut, "went stale at "+rep.Manager.StaleSince.Format(time.RFC3339))
	require.NotNil(t, rep.Manager.Deployment)
	assert.Equal(t, int32(2), rep.Manager.Deployment.Replicas)
	assert.Equal(t, int32(0), rep.Manager.Deployment.Ready)
	caFP, err := authn.CAFingerprint(provider.cp.Config.CAData)
	require.NoError(t, err)
	assert.Equal(t, caFP, rep.CAFingerprint, "the fingerprint generate tenant --expect-fingerprint needs")
	table, _ = mustCLI(t, "info", "--kubeconfig", provider.cp.Kubeconfig)
	assert.Contains(t, table, "Cluster CA:  "+caFP)
	assert.Contains(t, table, "0/2 ready")
	_, errOut, _ = runCLI(t, pairArgs("verify", consumer, provider)...)
	assert.Contains(t, errOut, "WARN (remote) liqo-auth-manager's Lease liqo/"+wire.ManagerName+", held by manager-1, went stale at")

	// Every permission of the tenant role missing: one summary in the table, with the cause.
	require.NoError(t, provider.client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.ControlPlaneBindingName, Namespace: wire.TenantNamespaceName(consumer.id)}}))
	eventuallyNoError(t, ctx, "the permissions cell summarizes", func(context.Context) error {
		out, _, _ := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " permissions ") && strings.Contains(line, "missing, 0 extra") && strings.Contains(line, "likely the tenant's access is not granted") {
				return nil
			}
		}
		return fmt.Errorf("not yet: %s", out)
	})

	// Sixteen more certificates still valid (renewals leave them): unauthenticate says so
	// in one line, with the likely cause, not one line each.
	require.NoError(t, cluster.UpdateTenantRecord(ctx, provider.client, provider.client, wire.DefaultLiqoNamespace, consumer.id, false, func(r *cluster.TenantRecord) error {
		for i := range 16 {
			r.AddCertificate(cluster.IssuedCertificate{Serial: fmt.Sprintf("%x", 0xa0+i), NotAfter: time.Now().Add(time.Hour), KeyFingerprint: "sha256:00"}, time.Now())
		}
		return nil
	}))
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Equal(t, 1, strings.Count(errOut, "cryptographically valid"), errOut)
	assert.Regexp(t, `1[67] certificates issued to cluster ID "cl-consumer" stay cryptographically valid.*likely cause`, errOut)
}
