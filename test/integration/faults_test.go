package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// csrRecorder remembers every CSR name ever created on a provider.
type csrRecorder struct {
	mu    sync.Mutex
	names map[string]bool
	stop  func()
}

func recordCSRs(t *testing.T, p *site) *csrRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := p.client.Watch(ctx, &certificatesv1.CertificateSigningRequestList{})
	require.NoError(t, err)
	r := &csrRecorder{names: map[string]bool{}, stop: cancel}
	go func() {
		for ev := range w.ResultChan() {
			if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && ev.Type == watch.Added {
				r.mu.Lock()
				r.names[csr.Name] = true
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return r
}

func (r *csrRecorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.names) }

// assertConverged checks that the pair is authenticated with no duplicate or leftover
// CSR, exactly the Tenant's bindings, and no Tenant stuck deleting.
func assertConverged(t *testing.T, c, p *site, rec *csrRecorder, wantCSRs int) {
	t.Helper()
	ctx := context.Background()
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	eventually(t, 10*time.Second, "no CSR is left", func(ctx context.Context) (bool, error) {
		var csrs certificatesv1.CertificateSigningRequestList
		err := p.client.List(ctx, &csrs)
		return len(csrs.Items) == 0, err
	})
	if rec != nil {
		assert.Equal(t, wantCSRs, rec.count(), "CSRs created")
	}
	assert.Len(t, tenantBindings(t, p.client, client.InNamespace(wire.TenantNamespaceName(c.id))), 2, "exactly the control-plane and tenant-reader bindings")
	var tenants authv1beta1.TenantList
	require.NoError(t, p.client.List(ctx, &tenants))
	for _, tn := range tenants.Items {
		assert.Nil(t, tn.DeletionTimestamp, "no Tenant stuck deleting")
	}
}

// TestManagerRestartsMidHandshake: the provider's manager dies while the consumer waits
// for its Tenant; a new manager finishes the handshake.
func TestManagerRestartsMidHandshake(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, c)
	m := startManager(t, p)
	rec := recordCSRs(t, p)
	m.Kill() // no Lease release: liqoctl still sees a manager and waits for it
	done := make(chan error, 1)
	go func() {
		_, errOut, err := runCLI(t, pairArgs("authenticate", c, p)...)
		if err != nil {
			err = assert.AnError
			t.Log(errOut)
		}
		done <- err
	}()
	time.Sleep(time.Second)
	startManager(t, p) // acquires the Lease once the dead one expires
	require.NoError(t, <-done)
	assertConverged(t, c, p, rec, 1)
}

// TestManagerCrashAfterCSRApproval kills the provider's manager as soon as it approved
// the CSR, before it can publish the certificate: the next manager finds the same CSR
// instead of making another.
func TestManagerCrashAfterCSRApproval(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, c)
	m := startManager(t, p)
	rec := recordCSRs(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := p.client.Watch(ctx, &certificatesv1.CertificateSigningRequestList{})
	require.NoError(t, err)
	killed := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok {
				continue
			}
			for _, cond := range csr.Status.Conditions {
				if cond.Type == certificatesv1.CertificateApproved {
					m.Kill()
					close(killed)
					return
				}
			}
		}
	}()
	done := make(chan error, 1)
	go func() { _, _, err := runCLI(t, pairArgs("authenticate", c, p, "--timeout", "90s")...); done <- err }()
	<-killed
	startManager(t, p)
	require.NoError(t, <-done)
	assertConverged(t, c, p, rec, 1)
}

// TestProviderAPIServerRestartsDuringAuthenticate restarts the provider's API server while
// authenticate runs; re-running the command converges.
func TestProviderAPIServerRestartsDuringAuthenticate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	for _, delay := range []time.Duration{50 * time.Millisecond, 250 * time.Millisecond} {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			_, _, err := runCLIContext(ctx, pairArgs("authenticate", c, p)...)
			done <- err
		}()
		time.Sleep(delay)
		p.cp.StopAPIServer()
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, p.cp.StartAPIServer(context.Background()))
		t.Logf("authenticate interrupted after %s ended with: %v", delay, <-done)
		_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
		require.Contains(t, errOut, "INFO (local)")
		assertConverged(t, c, p, nil, 0)
		mustCLI(t, pairArgs("unauthenticate", c, p)...)
	}
}

// TestAuthenticateResumesAfterTheNamespaceWasMade: a run of authenticate cut off (the
// provider's API server went away) after it created the provider's tenant namespace and
// before it recorded it, as TestProviderAPIServerRestartsDuringAuthenticate's cut may land,
// leaves the namespace with no record. The re-run takes it without
// --adopt-tenant-namespace: the API server recorded its creator, who may make tenant
// records (the designation controller's rule, cluster.DesignatedByCreator), and says so.
// Made by a namespace creator, it is still refused (TestLookAlikeNamespaces).
func TestAuthenticateResumesAfterTheNamespaceWasMade(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	cut := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(c.id), Labels: cluster.TenantNamespaceLabels(c.id)}}
	cut.Labels[wire.ManagedByLabel] = wire.ManagedByValue
	require.NoError(t, p.client.Create(ctx, cut))

	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	assert.Contains(t, errOut, "INFO (remote) Namespace "+cut.Name+", which existed without this cluster's record, is recorded as the tenant namespace")
	assert.NotContains(t, errOut, "adopted")
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, c.id)
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.Equal(t, cut.Name, rec.Namespace)
	assert.Equal(t, cut.UID, rec.NamespaceUID)
	assertConverged(t, c, p, nil, 0)
}

// TestUnauthenticateInterrupted cuts unauthenticate short at several points; a re-run
// always finishes the teardown and proves the revocation.
func TestUnauthenticateInterrupted(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	for _, after := range []time.Duration{5 * time.Millisecond, 150 * time.Millisecond, 220 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond} {
		mustCLI(t, pairArgs("authenticate", c, p)...)
		cut, cancel := context.WithTimeout(ctx, after)
		_, _, err := runCLIContext(cut, pairArgs("unauthenticate", c, p)...)
		cancel()
		t.Logf("unauthenticate cut after %s: %v", after, err)
		_, errOut := mustCLI(t, pairArgs("unauthenticate", c, p)...)
		require.Contains(t, errOut, "Access revoked: verified")
		var tenants authv1beta1.TenantList
		require.NoError(t, p.client.List(ctx, &tenants))
		assert.Empty(t, tenants.Items, "no Tenant left, none stuck on its finalizer")
		var ids authv1beta1.IdentityList
		require.NoError(t, c.client.List(ctx, &ids))
		assert.Empty(t, ids.Items)
		var secrets corev1.SecretList
		require.NoError(t, c.client.List(ctx, &secrets, client.InNamespace(wire.TenantNamespaceName(p.id))))
		assert.Empty(t, secrets.Items)
	}

	// Half a teardown done by hand, with no controller running: the Tenant hangs on its
	// finalizer. Re-running unauthenticate runs the provider's controllers and finishes.
	mustCLI(t, pairArgs("authenticate", c, p)...)
	pTN := wire.TenantNamespaceName(c.id)
	require.NoError(t, p.client.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metaOf(pTN, c.id)}))
	var stuck authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &stuck))
	require.NotNil(t, stuck.DeletionTimestamp, "without controllers the finalizer holds the Tenant")
	_, errOut := mustCLI(t, pairArgs("unauthenticate", c, p)...)
	require.Contains(t, errOut, "Access revoked: verified")
	assert.Empty(t, tenantBindings(t, p.client, client.InNamespace(pTN)))
}
