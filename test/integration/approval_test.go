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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// waitingLine is what liqoctl authenticate says, once, while the provider's administrator
// has not approved the consumer.
func waitingLine(id string) string {
	return `INFO (remote) Waiting for the provider's administrator to approve cluster "` + id + `" (they run: liqoctl approve tenant ` + id + `)`
}

// tenantsTable is kubectl get tenants in the namespace ns of s: the API server's table.
func tenantsTable(t *testing.T, s *site, ns string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.cp.Config)
	require.NoError(t, err)
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis", authv1beta1.GroupVersion.Group, authv1beta1.GroupVersion.Version, "namespaces", ns, "tenants").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err)
	return string(raw)
}

// assertPendingUntouched checks that the Tenant at key waits for approval, for the spec it
// has now, with no certificate published nor approved and no binding.
func assertPendingUntouched(t *testing.T, p *site, key client.ObjectKey) {
	t.Helper()
	eventually(t, 20*time.Second, "the Tenant waits for approval, decided for its current spec", func(ctx context.Context) (bool, error) {
		var got authv1beta1.Tenant
		if err := p.client.Get(ctx, key, &got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionApproved)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == authv1beta1.ReasonApprovalPending &&
			c.ObservedGeneration == got.Generation && got.Status.ObservedGeneration == got.Generation, nil
	})
	var got authv1beta1.Tenant
	require.NoError(t, p.client.Get(context.Background(), key, &got))
	assert.False(t, got.Status.AuthParams.HasCertificate(), "no certificate is published")
	assertNoCSRApproved(t, p, string(got.Spec.ClusterID))
	for _, b := range tenantBindings(t, p.client, client.InNamespace(key.Namespace)) {
		for _, sub := range b.Subjects {
			assert.NotEqual(t, string(got.Spec.ClusterID), sub.Name, "binding %s grants the consumer something", b.Name)
		}
	}
}

// TestApprovalPendingApprovedDenied: with a manager on a provider that requires approval,
// a consumer's handshake is accepted but waits, visible in kubectl get tenants and liqoctl
// info, and liqoctl authenticate says so once and waits; approved, the waiting
// authenticate completes; the consumer's Tenant re-created with another key waits again;
// a denial is refused while the consumer holds a certificate and its access (drain
// first), then ends the consumer's authenticate at once with the administrator's reason.
func TestApprovalPendingApprovedDenied(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	_, errOut := mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	assert.Contains(t, errOut, "New consumers wait for approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: tn, Name: c.id}

	t.Run("pending", func(t *testing.T) {
		_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--timeout", "15s")...)
		require.Error(t, err)
		assert.ErrorIs(t, err, handshake.ErrTimeout)
		assert.Contains(t, err.Error(), "waiting for the provider's administrator to approve cluster")
		assert.Equal(t, 1, strings.Count(errOut, waitingLine(c.id)), "said once:\n%s", errOut)
		assertPendingUntouched(t, p, key)
		table := tenantsTable(t, p, tn)
		assert.Contains(t, table, `"name":"Approval"`)
		assert.Contains(t, table, authv1beta1.ReasonApprovalPending)
		out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
		assert.Regexp(t, `(?m)^Approvals .*\n.*\n  cl-consumer +`+tn+` +Pending +sha256:`, out)
	})

	t.Run("approved while authenticate waits", func(t *testing.T) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		type result struct {
			errOut string
			err    error
		}
		done := make(chan result, 1)
		go func() {
			_, errOut, err := runCLIContext(actx, pairArgs("authenticate", c, p)...)
			done <- result{errOut, err}
		}()
		// It waits: nothing is issued before the administrator decides.
		select {
		case r := <-done:
			t.Fatalf("authenticate ended before the approval: %v\n%s", r.err, r.errOut)
		case <-time.After(5 * time.Second):
		}
		assertPendingUntouched(t, p, key)
		_, errOut := mustCLI(t, "approve", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		assert.Contains(t, errOut, "approved")
		assert.Contains(t, errOut, "issued")
		r := <-done
		require.NoError(t, r.err, r.errOut)
		assert.Equal(t, 1, strings.Count(r.errOut, waitingLine(c.id)), r.errOut)
		waitTenantCondition(t, p, key, authv1beta1.ConditionApproved, metav1.ConditionTrue, authv1beta1.ReasonApproved)
		consumerCreds := newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
		require.NoError(t, consumerCreds.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(tn)), "the consumer's identity works")
		out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
		assert.NotContains(t, out, "Approvals (")
	})

	t.Run("a Tenant re-created with another key waits again", func(t *testing.T) {
		require.NoError(t, p.client.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(tn, c.id)}))
		eventually(t, 20*time.Second, "the Tenant is gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(p.client.Get(ctx, key, &authv1beta1.Tenant{})), nil
		})
		// The consumer's key changes.
		require.NoError(t, c.client.Delete(ctx, &corev1.Secret{ObjectMeta: metaOf(wire.DefaultLiqoNamespace, wire.KeysSecretName)}))
		mustCLI(t, "install", "--kubeconfig", c.cp.Kubeconfig)
		_, errOut, err := runCLI(t, pairArgs("authenticate", c, p, "--timeout", "15s")...)
		require.ErrorIs(t, err, handshake.ErrTimeout, errOut)
		assert.Contains(t, errOut, waitingLine(c.id))
		assertPendingUntouched(t, p, key)
		var got authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, key, &got))
		rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, c.id)
		require.NoError(t, err)
		require.NotNil(t, rec.Approval)
		assert.NotEqual(t, rec.Approval.KeyFingerprint, got.Status.AcceptedKeyFingerprint, "the approval was of the other key")
	})

	const reason = "not a customer of this cluster"
	t.Run("denied", func(t *testing.T) {
		_, errOut, err := runCLI(t, "deny", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig, "--reason", reason)
		require.Error(t, err, "the consumer holds a certificate of the first key:\n%s", errOut)
		assert.Contains(t, err.Error(), "liqoctl drain tenant "+c.id)
		mustCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		_, errOut = mustCLI(t, "deny", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig, "--reason", reason)
		assert.Contains(t, errOut, "denied")
		mustCLI(t, "uncordon", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		waitTenantCondition(t, p, key, authv1beta1.ConditionApproved, metav1.ConditionFalse, authv1beta1.ReasonApprovalDenied)
		start := time.Now()
		_, errOut, err = runCLI(t, pairArgs("authenticate", c, p, "--timeout", "90s")...)
		require.ErrorIs(t, err, handshake.ErrDenied, errOut)
		assert.Contains(t, err.Error(), reason)
		assert.Less(t, time.Since(start), 45*time.Second, "a denial ends the wait at once")
		assertNoCSRApproved(t, p, c.id)
		var got authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, key, &got), "the Tenant stays visible")
		assert.Contains(t, tenantsTable(t, p, tn), authv1beta1.ReasonApprovalDenied)
		out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
		assert.Regexp(t, `  cl-consumer +`+tn+` +Denied +sha256:\S+ +\S+ +`+reason, out)
	})
}

// TestApprovalCannotBeForged: what a consumer's peering user, a Tenant writer of the tenant
// namespace or a status writer may write does not approve a key: an Approved condition set
// True, a Tenant's spec or annotations changed, the record (which they may not write),
// liqoctl approve with the peering user's credentials. Only the administrator's approval
// lets the peering user's waiting handshake complete.
func TestApprovalCannotBeForged(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: tn, Name: c.id}
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	peer := newClient(t, restConfigFromKubeconfig(t, []byte(out)))
	_, errOut, err := runCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu, "--timeout", "15s")
	require.ErrorIs(t, err, handshake.ErrTimeout, errOut)
	assertPendingUntouched(t, p, key)

	t.Run("status writer sets Approved and Ready True", func(t *testing.T) {
		sw := principal(t, p, "status-writer", "", rule(authv1beta1.GroupVersion.Group, "tenants", "get", "list", "watch"),
			rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var got authv1beta1.Tenant
			if err := sw.Get(ctx, key, &got); err != nil {
				return err
			}
			for _, typ := range []string{authv1beta1.ConditionApproved, authv1beta1.ConditionReady, authv1beta1.ConditionAccessGranted} {
				meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: authv1beta1.ReasonApproved,
					Message: "forged", ObservedGeneration: got.Generation})
			}
			return sw.Status().Update(ctx, &got)
		}))
		assertPendingUntouched(t, p, key)
	})

	t.Run("tenant writer changes the spec and annotations", func(t *testing.T) {
		tw := principal(t, p, "tenant-writer", tn, rule(authv1beta1.GroupVersion.Group, "tenants", "get", "list", "watch", "update", "patch"))
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var got authv1beta1.Tenant
			if err := tw.Get(ctx, key, &got); err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&got.ObjectMeta, "liqo.io/approved", "true")
			got.Spec.TenantCondition = authv1beta1.TenantConditionActive
			return tw.Update(ctx, &got)
		}))
		assertPendingUntouched(t, p, key)
	})

	t.Run("peering user", func(t *testing.T) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var got authv1beta1.Tenant
			if err := peer.Get(ctx, key, &got); err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&got.ObjectMeta, "liqo.io/approval", "Approved")
			return peer.Update(ctx, &got)
		}), "the peering user may write its Tenant")
		assertPendingUntouched(t, p, key)
		var rec corev1.ConfigMap
		require.NoError(t, peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(c.id)}, &rec), "it reads its record")
		rec.Data["approval"] = `{"decision":"Approved","keyFingerprint":"x"}`
		assert.True(t, apierrors.IsForbidden(peer.Update(ctx, &rec)), "it may not write its record")
		cfg := cluster.ForgeApprovalConfigMap(wire.DefaultLiqoNamespace, false)
		assert.True(t, apierrors.IsForbidden(peer.Update(ctx, cfg)), "nor the configuration")
		_, _, err := runCLI(t, "approve", "tenant", c.id, "--kubeconfig", pu)
		require.Error(t, err, "liqoctl approve with the peering user's credentials")
		assertPendingUntouched(t, p, key)
	})

	t.Run("the administrator approves", func(t *testing.T) {
		mustCLI(t, "approve", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
		mustCLI(t, "authenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", pu)
		waitTenantCondition(t, p, key, authv1beta1.ConditionReady, metav1.ConditionTrue, authv1beta1.ReasonReady)
	})
}

// TestApprovalKeepsConsumersHoldingACertificate: turned on, approval cuts off no consumer
// that holds a certificate (it counts as approved: its certificate is renewed, its
// authenticate completes); liqoctl install without the flag keeps the setting, with
// --require-approval=false it is off again and the Approved condition goes.
func TestApprovalKeepsConsumersHoldingACertificate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	tn := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: tn, Name: c.id}
	mustCLI(t, pairArgs("authenticate", c, p)...)
	var before authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, key, &before))
	assert.Nil(t, meta.FindStatusCondition(before.Status.Conditions, authv1beta1.ConditionApproved), "no Approved condition while approval is not required")

	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	waitTenantCondition(t, p, key, authv1beta1.ConditionApproved, metav1.ConditionTrue, authv1beta1.ReasonApprovedHoldingCertificate)
	_, errOut := mustCLI(t, "renew", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, errOut, "issued, valid until")
	_, errOut = mustCLI(t, pairArgs("authenticate", c, p)...)
	assert.NotContains(t, errOut, "Waiting for the provider's administrator")
	out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
	assert.NotContains(t, out, "Approvals (")

	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--nonce-ttl", "10m")
	cfg, err := cluster.GetConfig(ctx, p.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	assert.True(t, cfg.RequireApproval, "an install without the flag keeps it")
	assert.Equal(t, 10*time.Minute, cfg.NonceTTL)

	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval=false")
	cfg, err = cluster.GetConfig(ctx, p.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	assert.False(t, cfg.RequireApproval)
	assert.Equal(t, 10*time.Minute, cfg.NonceTTL, "turning approval off keeps the other settings")
	eventually(t, 20*time.Second, "the Approved condition goes", func(ctx context.Context) (bool, error) {
		var got authv1beta1.Tenant
		err := p.client.Get(ctx, key, &got)
		return err == nil && meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionApproved) == nil, err
	})
}
