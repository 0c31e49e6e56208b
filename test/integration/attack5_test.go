package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// TestAttack5LeaseWriterFarFutureRenewalCollectsALiveConsumer acts as a Lease writer of a
// provider's tenant namespace (leases get/update there). It stamps the presence Lease's
// renewTime a year ahead: the admission policy lets the last sign of life move forward, so
// it is accepted; peergc now ignores it (more than 10 minutes ahead) and counts from the
// Lease's creation; and every honest renewal the consumer makes afterwards goes "back" from
// the year-ahead stamp, which the policy refuses. A consumer that keeps trying to renew
// must not be collected.
func TestAttack5LeaseWriterFarFutureRenewalCollectsALiveConsumer(t *testing.T) {
	t.Parallel()
	const grace = 20 * time.Second
	p := peerWithManager(t, "--peer-gone-after="+grace.String())
	ctx, provider, pTN, key := context.Background(), p.provider, p.tn, p.key
	leaseKey, lease := p.presenceLease(t)
	// The consumer renews (as its manager does; here as the administrator).
	renew := func() error {
		var l coordinationv1.Lease
		if err := provider.client.Get(ctx, leaseKey, &l); err != nil {
			return err
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		return provider.client.Update(ctx, &l)
	}
	for until := lease.CreationTimestamp.Add(grace + 5*time.Second); time.Now().Before(until); time.Sleep(time.Second) {
		require.NoError(t, renew())
	}
	require.NoError(t, provider.client.Get(ctx, key, &authv1beta1.Tenant{}), "a consumer renewing its presence is kept")

	writer := principal(t, provider, "lease-writer", pTN, rule("coordination.k8s.io", "leases", "get", "update"))
	require.NoError(t, writer.Get(ctx, leaseKey, &lease))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(365 * 24 * time.Hour)}
	require.NoError(t, writer.Update(ctx, &lease), "the Lease writer stamps a renewal a year ahead")

	// The consumer keeps renewing every second for longer than the grace period.
	refused := 0
	var lastErr error
	for until := time.Now().Add(grace + 10*time.Second); time.Now().Before(until); time.Sleep(time.Second) {
		if err := renew(); err != nil {
			if refused == 0 {
				t.Logf("first consumer renewal after the forged stamp: %v", err)
			}
			refused++
			lastErr = err
		}
		if err := provider.client.Get(ctx, key, &authv1beta1.Tenant{}); err != nil {
			t.Logf("consumer renewals refused since the forged stamp: %d, last: %v", refused, lastErr)
			assert.NoError(t, err, "a consumer that keeps renewing its presence was collected after a Lease writer stamped a renewal a year ahead")
			return
		}
	}
	t.Logf("consumer renewals refused: %d, last: %v", refused, lastErr)
}

// TestAttack5StatusWriterBackdatesRenewAfter acts as a status writer (tenants/status) of a
// tenant namespace: it keeps the certificate the provider published, and its serial, but
// moves status.certificate.renewAfter into the past. The provider must not renew (issue a
// new certificate) on a status writer's word.
func TestAttack5StatusWriterBackdatesRenewAfter(t *testing.T) {
	t.Parallel()
	p := peerWithManager(t)
	ctx, provider, key := context.Background(), p.provider, p.key
	serial := tenantSerial(t, p.consumer, provider)
	require.NotEmpty(t, serial)
	issued := func() int { return p.issued(t) }
	before := issued()

	writer := p.statusWriter(t)
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, key, &tn))
	require.NotNil(t, tn.Status.Certificate)
	tn.Status.Certificate.RenewAfter = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	require.NoError(t, writer.Status().Update(ctx, &tn))

	time.Sleep(10 * time.Second)
	var got authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, key, &got))
	t.Logf("published serial %s (was %s), certificates recorded %d (were %d)", got.Status.Certificate.SerialNumber, serial, issued(), before)
	assert.Equal(t, before, issued(), "a status writer who back-dated renewAfter had the provider issue a new certificate")
	assert.Equal(t, serial, got.Status.Certificate.SerialNumber, "the published certificate was replaced on a status writer's word")
}

// TestAttack5StatusWriterInflatesHandshakeMetric acts as a status writer: it writes the
// Authenticated condition False and an invalid acceptanceSeal over an accepted Tenant.
// The provider re-verifies the same (already consumed) handshake, which still verifies,
// and seals it again. No consumer handshook: the accepted-handshakes counter must not move.
func TestAttack5StatusWriterInflatesHandshakeMetric(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	pAddr := freeLoopbackAddr(t)
	startManager(t, provider, "--consumer=false", "--metrics-bind-address="+pAddr)
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	labels := []string{"reason", authv1beta1.ReasonHandshakeAccepted, "result", metrics.ResultAccepted}
	body := waitSample(t, pAddr, "the accepted handshake", atLeast(1), metrics.HandshakesName, labels...)
	start, _ := sample(body, metrics.HandshakesName, labels...)
	serial := tenantSerial(t, consumer, provider)

	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	const rounds = 3
	for i := range rounds {
		var tn authv1beta1.Tenant
		require.NoError(t, writer.Get(ctx, key, &tn))
		seal := append([]byte(nil), tn.Status.AcceptanceSeal...)
		tn.Status.AcceptanceSeal = []byte(fmt.Sprintf("forged-%d", i))
		meta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionAuthenticated, Status: metav1.ConditionFalse,
			Reason: "Forged", Message: "forged by a status writer", ObservedGeneration: tn.Generation})
		require.NoError(t, writer.Status().Update(ctx, &tn))
		eventuallyNoError(t, ctx, "the Tenant sealed again", func(ctx context.Context) error {
			var got authv1beta1.Tenant
			if err := provider.client.Get(ctx, key, &got); err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionAuthenticated)
			if c == nil || c.Status != metav1.ConditionTrue || string(got.Status.AcceptanceSeal) == string(tn.Status.AcceptanceSeal) {
				return fmt.Errorf("not yet: %+v", c)
			}
			t.Logf("round %d: sealed again, same seal as before the forgery: %v", i, string(got.Status.AcceptanceSeal) == string(seal))
			return nil
		})
	}
	time.Sleep(2 * time.Second)
	body, err := scrape(ctx, pAddr)
	require.NoError(t, err)
	end, _ := sample(body, metrics.HandshakesName, labels...)
	t.Logf("accepted handshakes counted: %v before the status writer, %v after %d forgeries; serial %s -> %s", start, end, rounds, serial, tenantSerial(t, consumer, provider))
	assert.Equal(t, start, end, "a status writer made the provider count accepted handshakes that no consumer made")
}

// TestAttack5ClusterRoleBindingDeleterHidesALivePeeringUser acts as a ClusterRoleBinding
// writer (clusterrolebindings get/delete, no bind, no ClusterRole writes): it deletes the
// ClusterRoleBinding of a live peering user. The peering user keeps its namespace
// permissions (it may still write the consumer's Tenant); liqoctl info must still list it.
func TestAttack5ClusterRoleBindingDeleterHidesALivePeeringUser(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id, "--ttl", "2h")
	info, err := authn.ReadKubeconfig([]byte(out))
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	user := cert.Subject.CommonName
	listed, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig, "-o", "json")
	require.Contains(t, listed, user, "info lists the peering user")

	writer := principal(t, p, "crb-writer", "", rule(rbacv1.GroupName, "clusterrolebindings", "get", "list", "delete"))
	require.NoError(t, writer.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wire.PeeringUserClusterObjectName(c.id)}}))

	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{wire.UserGroup, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: wire.TenantNamespaceName(c.id), Verb: "update",
			Group: authv1beta1.GroupVersion.Group, Resource: "tenants", Name: c.id}}}
	require.NoError(t, p.client.Create(ctx, sar))
	t.Logf("peering user %s may still update Tenant %s: %v", user, c.id, sar.Status.Allowed)
	listed, _ = mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig, "-o", "json")
	if sar.Status.Allowed {
		assert.Contains(t, listed, user, "a peering user that may still write the consumer's Tenant is hidden from info by a ClusterRoleBinding deleter")
	}
	_, errOut, err := runCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id, "--ttl", "2h")
	t.Logf("second generate peering-user: err %v, stderr %s", err, errOut)
}
