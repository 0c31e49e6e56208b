package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cmd/info"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// freeLoopbackAddr returns a loopback address with a port nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeLoopbackAddr()
	require.NoError(t, err)
	return addr
}

// scrape reads a manager's metrics endpoint.
func scrape(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), err
}

// sample is the value of the series name{labels} in a scrape (ok false when absent): the
// labels must be exactly those given.
func sample(body, name string, labels ...string) (float64, bool) {
	var pairs []string
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	series := name
	if len(pairs) > 0 {
		series += "{" + strings.Join(pairs, ",") + "}"
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// waitSample waits until the series is present and cond holds on its value.
func waitSample(t *testing.T, addr, what string, cond func(float64) bool, name string, labels ...string) string {
	t.Helper()
	var body string
	eventuallyNoError(t, context.Background(), what, func(ctx context.Context) error {
		var err error
		if body, err = scrape(ctx, addr); err != nil {
			return err
		}
		v, ok := sample(body, name, labels...)
		if !ok || !cond(v) {
			return fmt.Errorf("%s%v is %v (present: %v)", name, labels, v, ok)
		}
		return nil
	})
	return body
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }

// TestOperatingPeers covers what an operator watches after the join: the managers'
// metrics, the status each side keeps per peer (last renewal, last refusal, and the
// columns kubectl shows), and removing a peering when the other cluster is gone.
func TestOperatingPeers(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	pAddr, cAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	// Certificates renewed 6 s after they are issued: the metrics and status see renewals.
	startManager(t, provider, "--consumer=false", "--metrics-bind-address="+pAddr, "--certificate-lifetime=10m", "--renew-before=594s")
	cm := startManager(t, consumer, "--provider=false", "--metrics-bind-address="+cAddr)

	// A nonce no handshake used yet is reported with its age.
	mustCLI(t, "create", "nonce", "--kubeconfig", provider.cp.Kubeconfig, "--remote-cluster-id", "cl-later")
	waitSample(t, pAddr, "the unused nonce's age", atLeast(0), metrics.NonceAgeName, "peer", "cl-later")

	started := time.Now()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	body := waitSample(t, pAddr, "the accepted handshake", atLeast(1), metrics.HandshakesName, "reason", authv1beta1.ReasonHandshakeAccepted, "result", metrics.ResultAccepted)
	v, ok := sample(body, metrics.CertificatesName, "kind", metrics.KindControlPlane, "outcome", metrics.OutcomeIssued)
	assert.True(t, ok && v >= 1, "issued certificates: %v", v)
	// The tenant controller, whose reconciles make the handshakes' writes, has its own
	// workers; the others the manager's.
	for ctrlName, want := range map[string]int{"tenant": tenant.Workers, "noncecreator": authmanager.Workers} {
		v, ok = sample(body, "controller_runtime_max_concurrent_reconciles", "controller", ctrlName)
		assert.True(t, ok && v == float64(want), "controller %s reconciles up to %v objects at once, want %d", ctrlName, v, want)
	}
	waitSample(t, pAddr, "the tenant ready", func(v float64) bool { return v == 1 }, metrics.ReadyName, "peer", consumer.id, "side", metrics.SideProvider)
	body = waitSample(t, pAddr, "the tenant's certificate expiry", atLeast(float64(started.Add(9*time.Minute).Unix())),
		metrics.ExpiryName, "kind", metrics.KindControlPlane, "peer", consumer.id, "side", metrics.SideProvider, "slice", "")
	v, _ = sample(body, metrics.ExpiryName, "kind", metrics.KindControlPlane, "peer", consumer.id, "side", metrics.SideProvider, "slice", "")
	assert.LessOrEqual(t, v, float64(time.Now().Add(11*time.Minute).Unix()), "a 10-minute certificate")
	_, ok = sample(body, metrics.NonceAgeName, "peer", consumer.id)
	assert.False(t, ok, "the consumed nonce is no longer reported")
	waitSample(t, cAddr, "the identity ready on the consumer", func(v float64) bool { return v == 1 }, metrics.ReadyName, "peer", provider.id, "side", metrics.SideConsumer)
	waitSample(t, cAddr, "the identity's expiry on the consumer", atLeast(float64(started.Add(9*time.Minute).Unix())),
		metrics.ExpiryName, "kind", metrics.KindControlPlane, "peer", provider.id, "side", metrics.SideConsumer, "slice", "")

	// A slice: its certificate is reported on both sides.
	mustCLI(t, "create", "resourceslice", "slice-m", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "--cpu", "1")
	waitSample(t, pAddr, "the slice certificate issued", atLeast(1), metrics.CertificatesName, "kind", metrics.KindResourceSlice, "outcome", metrics.OutcomeIssued)
	waitSample(t, pAddr, "the slice's expiry on the provider", atLeast(float64(started.Add(9*time.Minute).Unix())),
		metrics.ExpiryName, "kind", metrics.KindResourceSlice, "peer", consumer.id, "side", metrics.SideProvider, "slice", "slice-m")
	waitSample(t, cAddr, "the slice's expiry on the consumer", atLeast(float64(started.Add(9*time.Minute).Unix())),
		metrics.ExpiryName, "kind", metrics.KindResourceSlice, "peer", provider.id, "side", metrics.SideConsumer, "slice", "slice-m")

	// Renewals: counted, and the time of the last one is in the status on both sides.
	waitSample(t, pAddr, "a renewal", atLeast(1), metrics.CertificatesName, "kind", metrics.KindControlPlane, "outcome", metrics.OutcomeRenewed)
	pTN, cTN := wire.TenantNamespaceName(consumer.id), wire.TenantNamespaceName(provider.id)
	eventuallyNoError(t, ctx, "the last renewal in both statuses", func(ctx context.Context) error {
		var tn authv1beta1.Tenant
		if err := provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &tn); err != nil {
			return err
		}
		var id authv1beta1.Identity
		if err := consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(provider.id)}, &id); err != nil {
			return err
		}
		if tn.Status.LastRenewal == nil || id.Status.LastRenewal == nil {
			return fmt.Errorf("tenant %v, identity %v", tn.Status.LastRenewal, id.Status.LastRenewal)
		}
		return nil
	})

	// A refused handshake: counted by reason, and kept as the Tenant's last refusal.
	later := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: wire.TenantNamespaceName("cl-later"), Name: "cl-later"},
		Spec: authv1beta1.TenantSpec{ClusterID: "cl-later", PublicKey: []byte("not a key"), CSR: []byte("not a csr"), Signature: []byte("not a signature")}}
	require.NoError(t, provider.client.Create(ctx, later))
	var reason string
	eventuallyNoError(t, ctx, "the refusal in the Tenant's status", func(ctx context.Context) error {
		if err := provider.client.Get(ctx, client.ObjectKeyFromObject(later), later); err != nil {
			return err
		}
		c := meta.FindStatusCondition(later.Status.Conditions, authv1beta1.ConditionAuthenticated)
		if c == nil || later.Status.LastRefusal == nil {
			return fmt.Errorf("not refused yet: %+v", later.Status)
		}
		reason = c.Reason
		if later.Status.LastRefusal.Reason != c.Reason {
			return fmt.Errorf("last refusal %q, condition %q", later.Status.LastRefusal.Reason, c.Reason)
		}
		return nil
	})
	waitSample(t, pAddr, "the refusal counted", func(v float64) bool { return v == 1 }, metrics.HandshakesName, "reason", reason, "result", metrics.ResultRefused)

	// liqoctl info -o json: the documented schema, with the same status per peer.
	out, _ := mustCLI(t, "info", "--kubeconfig", provider.cp.Kubeconfig, "-o", "json")
	assert.NotContains(t, out, "null", "no null lists or fields")
	var pr info.Report
	require.NoError(t, json.Unmarshal([]byte(out), &pr))
	assert.Equal(t, info.SchemaVersion, pr.APIVersion)
	assert.Equal(t, info.ManagerRunning, pr.Manager.State)
	byCluster := map[string]info.Entry{}
	for _, e := range pr.Tenants {
		byCluster[e.Cluster] = e
	}
	require.Contains(t, byCluster, consumer.id)
	assert.Equal(t, "Active", byCluster[consumer.id].State)
	assert.True(t, byCluster[consumer.id].Ready)
	assert.NotNil(t, byCluster[consumer.id].LastRenewal)
	require.NotNil(t, byCluster["cl-later"].LastRefusal)
	assert.Equal(t, reason, byCluster["cl-later"].LastRefusal.Reason)
	assert.Equal(t, reason, byCluster["cl-later"].Reason)
	require.NotEmpty(t, pr.Certificates)
	assert.True(t, pr.Certificates[len(pr.Certificates)-1].Authorizes, "the tenant's access is granted")
	assert.NotNil(t, pr.PeeringUsers)
	out, _ = mustCLI(t, "info", "--kubeconfig", consumer.cp.Kubeconfig, "-o", "json")
	assert.NotContains(t, out, "null")
	var cr info.Report
	require.NoError(t, json.Unmarshal([]byte(out), &cr))
	require.Len(t, cr.Identities, 2, "the control plane's and the slice's")
	cp := cr.Identities[0]
	if cp.Type != "ControlPlane" {
		cp = cr.Identities[1]
	}
	assert.Equal(t, info.Entry{Namespace: cTN, Cluster: provider.id, Type: "ControlPlane", State: "Valid", Ready: true, Reason: "KubeconfigReady",
		Serial: cp.Serial, Expires: cp.Expires, LastRenewal: cp.LastRenewal}, cp)
	assert.NotNil(t, cp.LastRenewal)
	require.Len(t, cr.ResourceSlices, 1)
	assert.Equal(t, info.Slice{Name: "slice-m", Namespace: cTN, Role: "consumer", Cluster: provider.id, State: "Accepted", Resources: "cpu=1",
		Expires: cr.ResourceSlices[0].Expires}, cr.ResourceSlices[0])
	assert.Empty(t, cr.Tenants)

	// kubectl shows them as columns.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", provider.cp.Kubeconfig, "get", "tenants", "-A").CombinedOutput()
		require.NoError(t, err, "%s", out)
		lines := strings.Split(string(out), "\n")
		assert.Regexp(t, `^NAMESPACE\s+NAME\s+CONDITION\s+APPROVAL\s+READY\s+REASON\s+EXPIRES\s+RENEWED\s+REFUSED\s+AGE`, lines[0])
		assert.Contains(t, string(out), reason)
		out, err = exec.Command(kubectl, "--kubeconfig", consumer.cp.Kubeconfig, "get", "identities", "-A").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Regexp(t, `READY\s+REASON\s+EXPIRES\s+RENEWED\s+REFUSED`, string(out))
		assert.Contains(t, string(out), "KubeconfigReady")
	}

	// The provider is unreachable: unauthenticate says how to clean this side only.
	gone := filepath.Join(t.TempDir(), "gone.kubeconfig")
	data, err := os.ReadFile(provider.cp.Kubeconfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(gone, []byte(strings.ReplaceAll(string(data), provider.cp.Config.Host, "https://"+freeLoopbackAddr(t))), 0o600))
	_, _, err = runCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", gone, "--timeout", "10s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach the API server")
	assert.Contains(t, err.Error(), "liqoctl unauthenticate --remote-cluster-id ID")
	_, _, err = runCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", gone, "--remote-cluster-id", provider.id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "goes without --remote-kubeconfig")
	_, _, err = runCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", consumer.id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this cluster's own ID")

	// The consumer cleans its side alone, and is told what stays on the provider; its
	// slices only when it says so. Its manager stops first: with the provider really gone
	// it could not reach it either, while here it would give the slice back there.
	cm.Stop()
	_, _, err = runCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds ResourceSlices from provider \"cl-provider\": slice-m; pass --delete-resourceslices")
	_, errOut := mustCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "--delete-resourceslices")
	assert.Contains(t, errOut, "ResourceSlice slice-m removed here; its provider was not told")
	assert.Contains(t, errOut, "Identity, kubeconfig and signed nonce removed")
	assert.Contains(t, errOut, "Left on cluster cl-provider, as provider: the Tenant cl-consumer, its bindings, ResourceSlices slice-m; the certificate it issued to cl-consumer stays valid until")
	var left authv1beta1.ResourceSliceList
	require.NoError(t, consumer.client.List(ctx, &left, client.InNamespace(cTN)))
	assert.Empty(t, left.Items, "the slice is gone here")
	var ids authv1beta1.IdentityList
	require.NoError(t, consumer.client.List(ctx, &ids, client.InNamespace(cTN)))
	assert.Empty(t, ids.Items, "and its Identity")
	assert.Contains(t, errOut, "runs there: liqoctl unauthenticate --remote-cluster-id cl-consumer")
	err = consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(provider.id)}, &authv1beta1.Identity{})
	assert.True(t, apierrors.IsNotFound(err), "the Identity is gone: %v", err)
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &authv1beta1.Tenant{}), "the provider was not touched")

	// The provider's administrator does the same on its side: the Tenant goes, and the
	// revocation is proven there.
	_, errOut = mustCLI(t, "unauthenticate", "--kubeconfig", provider.cp.Kubeconfig, "--remote-cluster-id", consumer.id)
	assert.Contains(t, errOut, "ResourceSlices slice-m deleted")
	assert.Contains(t, errOut, "Tenant deleted")
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.Contains(t, errOut, "Left on cluster cl-consumer, as consumer: the Identity controlplane-cl-provider")
	err = provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "the Tenant is gone: %v", err)
	_, ok = sample(waitSample(t, pAddr, "the nonce of cl-later still reported", atLeast(0), metrics.NonceAgeName, "peer", "cl-later"),
		metrics.ReadyName, "peer", consumer.id, "side", metrics.SideProvider)
	assert.False(t, ok, "a removed tenant is no longer reported")

	// Run again, nothing is left: it says so and succeeds.
	_, errOut = mustCLI(t, "unauthenticate", "--kubeconfig", provider.cp.Kubeconfig, "--remote-cluster-id", consumer.id, "--delete-namespaces")
	assert.Contains(t, errOut, `No Identity, Tenant or ResourceSlice of cluster "cl-consumer" here`)
	assert.Contains(t, errOut, "Tenant namespace "+pTN+" deleted")
}

// TestPeerGoneIsCollected: a provider whose administrator set --peer-gone-after keeps a
// consumer while its manager renews its presence, and removes its Tenant and access once
// it has been silent for that long. The consumer's identity may renew its own presence
// Lease, and nothing else about Leases.
func TestPeerGoneIsCollected(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	startManager(t, provider, "--consumer=false", "--peer-gone-after=10s")
	cm := startManager(t, consumer, "--provider=false", "--presence-interval=1s")
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	joined := time.Now()
	pTN := wire.TenantNamespaceName(consumer.id)
	kc := kubeconfigOf(t, consumer, provider)

	// Acting as the consumer's identity: renew its Lease, by name, and that is all.
	assert.True(t, canI(t, kc, "update", "coordination.k8s.io", "leases", pTN, wire.PresenceLeaseName))
	assert.True(t, canI(t, kc, "patch", "coordination.k8s.io", "leases", pTN, wire.PresenceLeaseName))
	for _, tc := range []struct{ verb, ns, name string }{
		{"create", pTN, ""}, {"delete", pTN, wire.PresenceLeaseName}, {"update", pTN, "another-lease"},
		{"update", "kube-node-lease", wire.PresenceLeaseName}, {"list", pTN, ""},
	} {
		assert.False(t, canI(t, kc, tc.verb, "coordination.k8s.io", "leases", tc.ns, tc.name), "%s leases %s/%s", tc.verb, tc.ns, tc.name)
	}

	// Alive past the grace period: the consumer's manager renews the Lease.
	tenantKey := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	eventuallyNoError(t, ctx, "the presence renewed past the grace period", func(ctx context.Context) error {
		var lease coordinationv1.Lease
		if err := provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.PresenceLeaseName}, &lease); err != nil {
			return err
		}
		if err := provider.client.Get(ctx, tenantKey, &authv1beta1.Tenant{}); err != nil {
			return fmt.Errorf("the Tenant of a live consumer: %w", err)
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Before(ptr.To(metav1.NewMicroTime(joined.Add(12*time.Second)))) {
			return fmt.Errorf("renewed at %v", lease.Spec.RenewTime)
		}
		return nil
	})

	// The consumer goes away: after the grace period, its Tenant and access are gone.
	cm.Stop()
	eventuallyNoError(t, ctx, "the Tenant of the silent consumer deleted", func(ctx context.Context) error {
		err := provider.client.Get(ctx, tenantKey, &authv1beta1.Tenant{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Tenant is still there: %v", err)
		}
		return nil
	})
	assert.False(t, canI(t, kc, "get", "authentication.liqo.io", "tenants", pTN, consumer.id), "the access went with the Tenant")
	assert.False(t, canI(t, kc, "create", "authentication.liqo.io", "resourceslices", pTN, ""))
	var evs eventsv1.EventList
	require.NoError(t, provider.client.List(ctx, &evs, client.InNamespace(pTN)))
	found := false
	for _, e := range evs.Items {
		found = found || (e.Reason == authv1beta1.ReasonPeerGone && strings.Contains(e.Note, "--peer-gone-after"))
	}
	assert.True(t, found, "a PeerGone Event says why")
	rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	assert.NotNil(t, rec, "the tenant record, with the administrator's decisions, stays")
}

// TestRenewNow: the provider's administrator renews a consumer's certificate ahead of
// time; the consumer picks it up and verify passes with it.
func TestRenewNow(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	_, _, err := runCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no tenant namespace for consumer "cl-consumer"`)

	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	old := tenantSerial(t, consumer, provider)
	_, errOut := mustCLI(t, "renew", "tenant", consumer.id, "--kubeconfig", provider.cp.Kubeconfig)
	renewed := tenantSerial(t, consumer, provider)
	require.NotEqual(t, old, renewed)
	assert.Contains(t, errOut, "Renewal of certificate "+old+" requested")
	assert.Contains(t, errOut, "Certificate "+renewed+" issued")
	assert.Contains(t, errOut, "Certificate "+old+" stays cryptographically valid")
	var tn authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &tn))
	assert.NotNil(t, tn.Status.LastRenewal)
	rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	assert.Len(t, rec.Valid(time.Now()), 2, "both certificates are listed until they expire")

	// Without a manager on the consumer, authenticate picks it up; verify passes with it.
	// The provider's controllers it runs do not renew again: the request named the old
	// serial.
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Equal(t, renewed, identitySerial(t, consumer, provider))
	assert.Equal(t, renewed, tenantSerial(t, consumer, provider))
	mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig)
}

// forgetPeer makes s as it was before it ever peered with peerID, as a restore from a backup
// taken before the handshake would: its tenant namespace (with what it holds, finalizers
// and all) and its tenant record are gone. The cluster's own identity predates the backup.
func forgetPeer(t *testing.T, s *site, peerID string) {
	t.Helper()
	ctx := context.Background()
	ns := wire.TenantNamespaceName(peerID)
	var tenants authv1beta1.TenantList
	require.NoError(t, s.client.List(ctx, &tenants, client.InNamespace(ns)))
	for i := range tenants.Items {
		tn := &tenants.Items[i]
		patch := client.MergeFrom(tn.DeepCopy())
		tn.Finalizers = nil
		require.NoError(t, s.client.Patch(ctx, tn, patch))
	}
	require.NoError(t, client.IgnoreNotFound(s.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	require.NoError(t, client.IgnoreNotFound(s.client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(peerID)}})))
	eventuallyNoError(t, ctx, "the tenant namespace gone", func(ctx context.Context) error {
		err := s.client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

// TestRecoverAfterRestore: either cluster restored from a backup taken before the
// handshake (simulated by removing what the handshake made there: testenv cannot restore an
// etcd snapshot under a running API server). verify names the failure, and authenticate
// again recovers; verify then passes.
func TestRecoverAfterRestore(t *testing.T) {
	t.Parallel()
	for restored, failed := range map[string]string{"provider": "cl-consumer on cl-provider: permissions", "consumer": "cl-consumer on cl-provider: identity"} {
		t.Run(restored, func(t *testing.T) {
			consumer, provider := cliSites(t)
			mustCLI(t, pairArgs("authenticate", consumer, provider)...)
			mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig)
			if restored == "provider" {
				forgetPeer(t, provider, consumer.id)
			} else {
				forgetPeer(t, consumer, provider.id)
			}
			_, _, err := runCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
			require.Error(t, err, "verify notices")
			assert.Contains(t, err.Error(), failed)
			mustCLI(t, pairArgs("authenticate", consumer, provider)...)
			mustCLI(t, "verify", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
			assertTenantAccess(t, provider, consumer, kubeconfigOf(t, consumer, provider))
		})
	}
}

// TestMetricsSeriesComeOnlyFromPeers: someone who may create namespaces and Secrets, and
// Tenants in them, makes objects that look like a peer's. The manager's metrics add no
// series for them: only what the manager accepted or created in a recorded tenant
// namespace is reported.
func TestMetricsSeriesComeOnlyFromPeers(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "metrics-provider"), "cl-provider")[0]
	addr := freeLoopbackAddr(t)
	startManager(t, p, "--consumer=false", "--metrics-bind-address="+addr)
	ctx := context.Background()
	ns := wire.TenantNamespaceName("cl-forged")
	forger := principal(t, p, "namespace-forger", "",
		rule("", "namespaces", "create"), rule("", "secrets", "create"), rule("authentication.liqo.io", "tenants", "create"))
	require.NoError(t, forger.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: "cl-forged"}}}))
	for _, where := range []string{ns, "default"} {
		require.NoError(t, forger.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: where, Name: wire.NonceSecretName,
			Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-forged"}}, Data: map[string][]byte{wire.NonceField: []byte("x")}}))
	}
	require.NoError(t, forger.Create(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cl-forged"},
		Spec: authv1beta1.TenantSpec{ClusterID: "cl-forged"}, Status: authv1beta1.TenantStatus{AcceptedKeyFingerprint: "sha256:forged"}}))

	// A real unused nonce, made by the administrator, is reported: the scrape sees the cache.
	mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", "cl-real")
	body := waitSample(t, addr, "the real nonce", atLeast(0), metrics.NonceAgeName, "peer", "cl-real")
	assert.NotContains(t, body, "cl-forged", "no series for the forged objects")

	// A Secret writer of the real tenant namespace marks the unused nonce as consumed, and
	// as kept stripped by the cache: the tenant record, not the Secret, says it is unused.
	realNS := wire.TenantNamespaceName("cl-real")
	writer := principal(t, p, "tenant-secret-writer", realNS, rule("", "secrets", "get", "update", "patch"))
	var nonce corev1.Secret
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: realNS, Name: wire.NonceSecretName}, &nonce))
	nonce.Annotations = map[string]string{wire.StrippedAnnotation: "true", wire.NonceConsumedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}
	require.NoError(t, writer.Update(ctx, &nonce))
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		body, err := scrape(ctx, addr)
		require.NoError(t, err)
		_, ok := sample(body, metrics.NonceAgeName, "peer", "cl-real")
		require.True(t, ok, "a Secret writer's annotations do not hide the unused nonce")
	}

	// The administrator made the tenant namespace and its nonce before the record (by
	// hand, then liqoctl create nonce, which keeps the young nonce): the cache got the
	// Secret while no record named its namespace, and keeps it stripped until it changes,
	// which an unused nonce with its issue time never does (the same happens to one the
	// command makes, when the Secret's event reaches the cache before the record's). It is
	// reported all the same.
	early := wire.TenantNamespaceName("cl-early")
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: early,
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: "cl-early"}}}))
	value, err := authn.NewNonce()
	require.NoError(t, err)
	require.NoError(t, p.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: early, Name: wire.NonceSecretName,
		Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-early"},
		Annotations: map[string]string{wire.NonceIssuedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Data: map[string][]byte{wire.NonceField: []byte(value)}}))
	time.Sleep(time.Second) // the cache takes it in, stripped
	_, out := mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", "cl-early")
	var kept corev1.Secret
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: early, Name: wire.NonceSecretName}, &kept))
	require.Equal(t, value, string(kept.Data[wire.NonceField]), "the young nonce is kept: %s", out)
	waitSample(t, addr, "the nonce the cache got before its record", atLeast(0), metrics.NonceAgeName, "peer", "cl-early")
}
