package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// TestAttack6StatusWriterReplaysRenewRequest acts as a status writer (tenants/status) of
// a provider's tenant namespace after the administrator once ran liqoctl renew tenant. The
// record keeps renewSerial (the serial that was replaced) for good. The status writer
// publishes that old certificate again: it is one this provider issued for the accepted
// key, still valid, so checkPublished keeps it, and the renewal asked for it long ago
// makes it "due". Each time, the provider issues a new certificate: the status writer
// makes the provider issue at will.
func TestAttack6StatusWriterReplaysRenewRequest(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	startManager(t, provider, "--consumer=false")
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	var first authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, key, &first))
	require.NotNil(t, first.Status.Certificate)
	old := first.Status.Certificate.SerialNumber

	mustCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig)
	renewed := tenantSerial(t, consumer, provider)
	require.NotEqual(t, old, renewed)
	issued := func() int {
		rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
		require.NoError(t, err)
		return len(rec.Certificates)
	}
	time.Sleep(3 * time.Second)
	before := issued()

	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	const rounds = 3
	for i := range rounds {
		var tn authv1beta1.Tenant
		require.NoError(t, writer.Get(ctx, key, &tn))
		tn.Status.AuthParams.SignedCRT = first.Status.AuthParams.SignedCRT
		tn.Status.Certificate = first.Status.Certificate.DeepCopy()
		require.NoError(t, writer.Status().Update(ctx, &tn))
		time.Sleep(5 * time.Second)
		t.Logf("round %d: published serial %s, certificates recorded %d (were %d)", i, tenantSerial(t, consumer, provider), issued(), before)
	}
	assert.Equal(t, before, issued(), fmt.Sprintf("a status writer who published the certificate %s an administrator once renewed had the provider issue new certificates", old))
}

// TestAttack6NamespaceCreatorRevivesSeriesOfADeletedTenantNamespace acts as a namespace
// creator (namespaces create; then, inside the namespace it made, Secrets and Tenants and
// their status, as any namespace owner). The administrator made a tenant namespace (liqoctl
// create nonce) and later deleted it with kubectl: the tenant record still names
// liqo-tenant-<peer>, with the UID of the namespace that is gone. The namespace creator
// makes a namespace of that name, with the tenant labels: it is not designated (its
// creator may not make records; its UID is not the recorded one), yet the manager's metrics
// take it as the peer's tenant namespace (designated() compares the name only) and report
// the namespace creator's nonce and Tenant as the peer's.
func TestAttack6NamespaceCreatorRevivesSeriesOfADeletedTenantNamespace(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "attack6-metrics"), "cl-provider")[0]
	addr := freeLoopbackAddr(t)
	startManager(t, p, "--consumer=false", "--metrics-bind-address="+addr)
	ctx := context.Background()
	const peer = "cl-gone"
	ns := wire.TenantNamespaceName(peer)
	mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", peer)
	waitSample(t, addr, "the administrator's nonce", atLeast(0), metrics.NonceAgeName, "peer", peer)

	// The administrator deletes the namespace (kubectl delete namespace).
	require.NoError(t, p.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	eventuallyNoError(t, ctx, "the namespace gone", func(ctx context.Context) error {
		err := p.client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	eventuallyNoError(t, ctx, "no series for the peer", func(ctx context.Context) error {
		body, err := scrape(ctx, addr)
		if err != nil {
			return err
		}
		if _, ok := sample(body, metrics.NonceAgeName, "peer", peer); ok {
			return fmt.Errorf("nonce series still there")
		}
		return nil
	})
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, peer)
	require.NoError(t, err)
	require.NotNil(t, rec)
	t.Logf("record after the namespace was deleted: namespace %q uid %q", rec.Namespace, rec.NamespaceUID)

	creator := principal(t, p, "ns-creator", "", rule("", "namespaces", "create", "get"))
	require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: cluster.TenantNamespaceLabels(peer)}}))
	// What the namespace creator holds inside the namespace it made.
	owner := principal(t, p, "ns-creator", ns, rule("", "secrets", "create", "get", "update"),
		rule(authv1beta1.GroupVersion.Group, "tenants", "create", "get", "update"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update"))
	require.NoError(t, owner.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName,
		Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: peer}}, Data: map[string][]byte{wire.NonceField: []byte("forged-nonce")}}))
	tn := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peer, Labels: map[string]string{wire.RemoteClusterIDLabel: peer}},
		Spec: authv1beta1.TenantSpec{ClusterID: peer}}
	require.NoError(t, owner.Create(ctx, tn))
	// The manager answers the Tenant (it refuses it) at once, so the status is written on
	// the latest version.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if getErr := owner.Get(ctx, client.ObjectKeyFromObject(tn), tn); getErr != nil {
			return getErr
		}
		tn.Status.AcceptedKeyFingerprint = "sha256:forged"
		return owner.Status().Update(ctx, tn)
	}))

	designated, err := cluster.DesignatedTenantNamespaces(ctx, p.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	t.Logf("designated tenant namespaces: %v", designated)
	require.False(t, designated.Holds(ns, peer), "the namespace creator's namespace is no tenant namespace")

	time.Sleep(3 * time.Second)
	body, err := scrape(ctx, addr)
	require.NoError(t, err)
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, peer) {
			t.Logf("series: %s", line)
		}
	}
	_, nonce := sample(body, metrics.NonceAgeName, "peer", peer)
	_, ready := sample(body, metrics.ReadyName, "peer", peer, "side", metrics.SideProvider)
	assert.False(t, nonce, "a namespace creator's Secret in a namespace of the recorded name, not the recorded UID, is reported as the peer's unused nonce")
	assert.False(t, ready, "a namespace creator's Tenant in a namespace of the recorded name, not the recorded UID, is reported as the peer's")
}

// TestAttack6StatusWriterMakesRenewTenantReportAFalseRenewal acts as a status writer
// (tenants/status) of a provider's tenant namespace where no manager runs (liqoctl runs the
// provider's controllers for each command). It writes another serial into
// status.certificate. The administrator then runs liqoctl renew tenant: the command takes
// the serial to replace from the status, records it as the renewal asked for, and waits
// for the status to show another serial. The controllers it starts put back the
// certificate the provider published (a serial that is not the one asked for, so nothing
// is renewed), and the command reports that certificate as the renewal: the
// administrator is told the certificate was renewed when nothing was issued.
func TestAttack6StatusWriterMakesRenewTenantReportAFalseRenewal(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	serial := tenantSerial(t, consumer, provider)
	issued := func() int {
		rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
		require.NoError(t, err)
		return len(rec.Certificates)
	}
	before := issued()

	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, key, &tn))
	tn.Status.Certificate.SerialNumber = "feedface"
	require.NoError(t, writer.Status().Update(ctx, &tn))

	_, errOut, err := runCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig, "--timeout", "20s")
	t.Logf("liqoctl renew tenant: err %v\n%s", err, errOut)
	now := tenantSerial(t, consumer, provider)
	t.Logf("published serial %s (was %s), certificates recorded %d (were %d)", now, serial, issued(), before)
	if err == nil {
		assert.NotEqual(t, serial, now, "liqoctl renew tenant succeeded, yet the Tenant publishes the certificate it had")
		assert.Greater(t, issued(), before, "liqoctl renew tenant succeeded, yet no certificate was issued")
	}
}
