package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// renewingProvider makes the provider renew 600-second certificates about every 6 seconds.
var renewingProvider = []string{"--certificate-lifetime=10m", "--renew-before=594s"}

func identitySerial(t *testing.T, c, p *site) string {
	t.Helper()
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id))
	if id.Status.Certificate == nil || !meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady) {
		return ""
	}
	return id.Status.Certificate.SerialNumber
}

func tenantSerial(t *testing.T, c, p *site) string {
	t.Helper()
	var tn authv1beta1.Tenant
	require.NoError(t, p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &tn))
	if tn.Status.Certificate == nil {
		return ""
	}
	return tn.Status.Certificate.SerialNumber
}

func hasEvent(t *testing.T, s *site, ns, name, reason string) bool {
	var evs eventsv1.EventList
	require.NoError(t, s.client.List(context.Background(), &evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}

// TestCertificateRenewal: the consumer's kubeconfig keeps working across renewals with no
// failed request, the serial changes each time, a consumer manager down through renewals
// catches up when it returns, and both sides record Events.
func TestCertificateRenewal(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	consumerMgr := startManager(t, c)
	startManager(t, p, renewingProvider...)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	first := identitySerial(t, c, p)
	require.NotEmpty(t, first)

	// A client of the consumer polls the provider the whole time, with the kubeconfig the
	// consumer holds at each moment.
	var requests, failures atomic.Int64
	serials := sync.Map{}
	ctx, stopPolling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			kc := kubeconfigOf(t, c, p)
			info, err := authn.ReadKubeconfig(kc)
			if err == nil {
				if cert, err := authn.ParseCertificate(info.CertPEM); err == nil {
					serials.Store(cert.SerialNumber.Text(16), true)
				}
			}
			user := newClient(t, restConfigFromKubeconfig(t, kc))
			requests.Add(1)
			if err := user.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{}); err != nil && ctx.Err() == nil {
				failures.Add(1)
				t.Logf("request failed: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	seen := map[string]bool{first: true}
	eventually(t, 90*time.Second, "two renewals reach the consumer's Identity", func(context.Context) (bool, error) {
		if s := identitySerial(t, c, p); s != "" {
			seen[s] = true
		}
		return len(seen) >= 3, nil
	})
	eventually(t, 10*time.Second, "the polling client used the latest kubeconfig", func(context.Context) (bool, error) {
		_, ok := serials.Load(identitySerial(t, c, p))
		return ok, nil
	})
	stopPolling()
	wg.Wait()
	assert.Zero(t, failures.Load(), "no request failed across renewals (of %d)", requests.Load())
	nKubeconfigSerials := 0
	serials.Range(func(any, any) bool { nKubeconfigSerials++; return true })
	assert.GreaterOrEqual(t, nKubeconfigSerials, 3, "the kubeconfig carried each renewed certificate")
	assert.True(t, hasEvent(t, p, wire.TenantNamespaceName(c.id), c.id, "CertificateRenewed"), "a renewal Event on the provider")
	assert.True(t, hasEvent(t, c, wire.TenantNamespaceName(p.id), wire.IdentityName(p.id), "CertificateRenewed"), "a renewal Event on the consumer")

	// The consumer's manager is down while the provider renews twice; it catches up.
	consumerMgr.Stop()
	before := tenantSerial(t, c, p)
	stale := identitySerial(t, c, p)
	renewed := map[string]bool{before: true}
	eventually(t, 60*time.Second, "the provider renews twice", func(context.Context) (bool, error) {
		renewed[tenantSerial(t, c, p)] = true
		return len(renewed) >= 3, nil
	})
	assert.Equal(t, stale, identitySerial(t, c, p), "nobody updates the Identity while the manager is down")
	startManager(t, c)
	eventually(t, 30*time.Second, "the returning manager picks up the latest certificate", func(context.Context) (bool, error) {
		return identitySerial(t, c, p) == tenantSerial(t, c, p), nil
	})
}

// TestExpiredIdentity: an Identity whose certificate expired is reported, by its status
// and by liqoctl info, with the way out; re-running authenticate restores it.
func TestExpiredIdentity(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	startControllers(t, c, authmanager.Consumer)
	ctx := context.Background()
	key, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: c.id, Organization: []string{wire.UserGroup}},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cp.CA.Cert, key.Public(), p.cp.CA.Key)
	require.NoError(t, err)
	expired := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cTN := wire.TenantNamespaceName(p.id)
	var id authv1beta1.Identity
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id))
	id.Spec.AuthParams.SignedCRT = expired
	require.NoError(t, c.client.Update(ctx, &id))
	expectIdentityRefused(t, c, &id, string(authn.ReasonCertificateExpired))

	out, _ := mustCLI(t, "info", "--kubeconfig", c.cp.Kubeconfig)
	assert.Contains(t, out, "CertificateExpired")
	assert.Contains(t, out, "liqoctl authenticate again")

	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	assert.Contains(t, errOut, "Identity status is filled")
	assert.Equal(t, tenantSerial(t, c, p), identitySerial(t, c, p))
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	var kc corev1.Secret
	require.NoError(t, c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.KubeconfigSecretName(id.Name)}, &kc))
}
