package integration

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
)

var caFingerprintLine = regexp.MustCompile(`whose CA fingerprint is (sha256:[0-9a-f]{64})`)

// TestRoughEdgesManualFlow walks the manual flow as a new user does, with no manager on
// either side, where issue 38 found rough edges: the CA fingerprint is said at create
// nonce; a wrong --expect-fingerprint says which fingerprint comes from where and the
// command that forgets a pin; a refused Tenant carries no finalizer, so deleting it
// returns with no manager running; an accepted one does, and every message that leads to
// its deletion names the command that releases it.
func TestRoughEdgesManualFlow(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	C, P := []string{"--kubeconfig", consumer.cp.Kubeconfig}, []string{"--kubeconfig", provider.cp.Kubeconfig}
	args := func(base []string, extra ...string) []string { return append(append([]string{}, extra...), base...) }

	_, errOut := mustCLI(t, args(P, "create", "nonce", "--remote-cluster-id", consumer.id)...)
	m := caFingerprintLine.FindStringSubmatch(errOut)
	require.NotNil(t, m, "create nonce says the CA fingerprint consumers will pin:\n%s", errOut)
	caFP := m[1]
	want, err := authn.CAFingerprint(provider.cp.CA.CertPEM)
	require.NoError(t, err)
	assert.Equal(t, want, caFP, "the fingerprint of the provider's CA")
	assert.Contains(t, errOut, "--expect-fingerprint "+caFP, "the next step carries it")
	nonce, _ := mustCLI(t, args(P, "get", "nonce", "--remote-cluster-id", consumer.id)...)
	nonce = strings.TrimSpace(nonce)

	// The consumer pins the provider CA, then is given another fingerprint.
	tenantYAML, _ := mustCLI(t, args(C, "generate", "tenant", "--remote-cluster-id", provider.id, "--nonce", nonce, "--expect-fingerprint", caFP)...)
	// Without the flag, it says which CA the Identity must present.
	_, errOut = mustCLI(t, args(C, "generate", "tenant", "--remote-cluster-id", provider.id, "--nonce", nonce)...)
	assert.Contains(t, errOut, "Provider CA "+caFP+" stays pinned")
	assert.NotContains(t, errOut, "No provider CA is pinned")
	other := "sha256:" + strings.Repeat("1", 64)
	_, _, err = runCLI(t, args(C, "generate", "tenant", "--remote-cluster-id", provider.id, "--nonce", nonce, "--expect-fingerprint", other)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this cluster pinned CA "+caFP+" for provider \"cl-provider\"")
	assert.Contains(t, err.Error(), "--expect-fingerprint gives "+other)
	assert.NotContains(t, err.Error(), "the provider presents", "the provider presented nothing: the user gave it")
	// The advice replaces the pin, once confirmed: removing it would let the next Identity
	// accepted, whoever wrote it, choose (helper-27).
	assert.Contains(t, err.Error(), `kubectl patch configmap -n liqo `+wire.TenantRecordName(provider.id)+` --type=merge -p '{"data":{"caFingerprint":"`+other+`"}}'`)
	assert.NotContains(t, err.Error(), `"op":"remove"`)

	// A refused Tenant: the provider's controllers run for a while, then stop; deleting
	// the Tenant needs nobody.
	tn := wire.TenantNamespaceName(consumer.id)
	bad := newAttacker(t, consumer.id).honestTenant(t, tn, nonce)
	bad.Spec.Signature = newAttacker(t, consumer.id).sign(t, nonce)
	require.NoError(t, provider.client.Create(ctx, bad))
	stop := runProviderControllers(t, provider)
	expectRefused(t, provider, bad, string(authn.ReasonSignatureInvalid))
	stop()
	got := &authv1beta1.Tenant{}
	require.NoError(t, provider.client.Get(ctx, client.ObjectKeyFromObject(bad), got))
	assert.NotContains(t, got.Finalizers, wire.TenantFinalizer, "a refused Tenant causes nothing and gets no finalizer")
	require.NoError(t, provider.client.Delete(ctx, got))
	eventually(t, 10*time.Second, "the refused Tenant is gone with no manager running", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKeyFromObject(bad), got)), nil
	})

	// The consumer's honest Tenant is accepted (in-process controllers of generate
	// identity): it holds the finalizer, and the mismatch names what releases it.
	applyYAML(t, provider.client, []byte(tenantYAML))
	_, _, err = runCLI(t, args(P, "generate", "identity", "--remote-cluster-id", consumer.id, "--expect-fingerprint", "sha256:"+strings.Repeat("0", 64))...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not the expected")
	assert.Contains(t, err.Error(), "liqoctl unauthenticate --remote-cluster-id "+consumer.id)
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: consumer.id}, got))
	assert.Contains(t, got.Finalizers, wire.TenantFinalizer, "an accepted Tenant keeps its finalizer")
	mustCLI(t, args(P, "unauthenticate", "--remote-cluster-id", consumer.id)...)
	assert.True(t, apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: consumer.id}, got)), "the command named removes the Tenant")
}

// runProviderControllers runs the provider's controllers in-process until the returned
// function (or the end of the test) stops them.
func runProviderControllers(t *testing.T, s *site) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := authmanager.Start(ctx, s.cp.Config, authmanager.Connection{},
		authmanager.Options{Role: authmanager.Provider, Tenant: issuing.Options{APIServer: s.cp.URL, CA: s.cp.CA.CertPEM}}, testLogger(t))
	require.NoError(t, err)
	require.NoError(t, r.WaitSynced(ctx))
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); _ = r.Stop() }) }
	t.Cleanup(stop)
	return stop
}

var (
	liqoctlBuild   sync.Once
	liqoctlBinPath string
	liqoctlErr     error
)

// liqoctlBinary builds cmd/liqoctl once per test binary, as released.
func liqoctlBinary(t testing.TB) string {
	t.Helper()
	liqoctlBuild.Do(func() {
		dir, err := os.MkdirTemp("", "liqoctl-bin-")
		if err != nil {
			liqoctlErr = err
			return
		}
		liqoctlBinPath = filepath.Join(dir, "liqoctl")
		liqoctlErr = goBuild(dir, "./cmd/liqoctl")
	})
	require.NoError(t, liqoctlErr)
	return liqoctlBinPath
}

// TestInterruptedAuthenticate sends SIGINT to the real liqoctl while authenticate waits:
// it exits 130 saying "interrupted; re-run to resume", never a timeout, and the re-run
// converges, with no CSR left over.
func TestInterruptedAuthenticate(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	bin := liqoctlBinary(t)
	// Told that Liqo's controllers act on the provider, where none runs, authenticate waits
	// for the nonce: the interruption comes during a wait.
	cmd := exec.Command(bin, pairArgs("authenticate", consumer, provider, "--remote-controllers", "liqo", "--timeout", "2m")...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var all strings.Builder
	waiting := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "Nonce secret ensured") {
				signalled = true
				close(waiting)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		if !signalled {
			close(waiting)
		}
	}()
	select {
	case <-waiting:
	case <-time.After(90 * time.Second):
		t.Fatal("authenticate never reached the nonce")
	}
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "liqoctl exits non-zero: %v\n%s", err, all.String())
	assert.Equal(t, 130, exit.ExitCode(), all.String())
	assert.Contains(t, all.String(), "interrupted; re-run to resume")
	assert.NotContains(t, all.String(), "timed out")
	assert.NotContains(t, all.String(), "context canceled")

	// The re-run, told this time that the provider runs this project's controllers,
	// adopts the tenant namespace the first run made for Liqo's (which keep no record).
	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider, "--adopt-tenant-namespace")...)
	assert.Contains(t, errOut, "(local) Identity status is filled")
	assertNoCSRLeft(t, provider, consumer.id)
}

func assertNoCSRLeft(t *testing.T, p *site, consumerID string) {
	t.Helper()
	eventually(t, 10*time.Second, "no CSR of "+consumerID+" is left", func(ctx context.Context) (bool, error) {
		var csrs certificatesv1.CertificateSigningRequestList
		if err := p.client.List(ctx, &csrs, client.MatchingLabels{wire.RemoteClusterIDLabel: consumerID}); err != nil {
			return false, err
		}
		return len(csrs.Items) == 0, nil
	})
}

// TestUninstallAsksAndCleans: uninstall asks before destroying, refuses to guess when
// stdin is no terminal, and removes the tenant namespaces it made, so that a re-install
// authenticates again without --adopt-tenant-namespace.
func TestUninstallAsksAndCleans(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	tn := wire.TenantNamespaceName(provider.id)
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Name: tn}, &corev1.Namespace{}), "unauthenticate keeps the tenant namespace")

	_, _, err := runCLI(t, "uninstall", "--kubeconfig", consumer.cp.Kubeconfig)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "its cluster ID and key")
	assert.Contains(t, err.Error(), "It deletes the tenant namespaces it made: "+tn)
	assert.Contains(t, err.Error(), "stdin is not a terminal, so liqoctl cannot ask: pass --skip-confirm")
	id, err := cluster.GetClusterID(ctx, consumer.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err, "nothing was removed without a yes")
	assert.Equal(t, consumer.id, id)

	_, errOut := mustCLI(t, "uninstall", "--kubeconfig", consumer.cp.Kubeconfig, "--skip-confirm")
	assert.Contains(t, errOut, `Tenant namespace "`+tn+`" deleted`)
	eventually(t, 60*time.Second, "the tenant namespace is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(consumer.client.Get(ctx, client.ObjectKey{Name: tn}, &corev1.Namespace{})), nil
	})
	eventually(t, 60*time.Second, "the Liqo namespace is gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(consumer.client.Get(ctx, client.ObjectKey{Name: wire.DefaultLiqoNamespace}, &corev1.Namespace{})), nil
	})
	mustCLI(t, "install", "--kubeconfig", consumer.cp.Kubeconfig, "--cluster-id", consumer.id)
	_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(local) Identity status is filled", "no --adopt-tenant-namespace needed")
}

// TestOneRemovalRule: every removal follows one rule. What is already gone succeeds and
// says there was nothing to remove; a peer this cluster never knew fails, listing the
// known ones. A deleted peering user is named as such, with what to ask for.
func TestOneRemovalRule(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	_, errOut := mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(local) Identity, kubeconfig and signed nonce removed")
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "(local) No Identity, kubeconfig or signed nonce left: nothing to remove")
	assert.Contains(t, errOut, "(remote) No binding, nonce or certificate request left: nothing to remove")
	assert.NotContains(t, errOut, " removed\n", "a re-run claims no removal")

	for _, args := range [][]string{
		{"unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", "cl-never-existed"},
		{"delete", "resourceslice", "x", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", "cl-never-existed"},
		{"delete", "peering-user", "--kubeconfig", provider.cp.Kubeconfig, "--consumer-cluster-id", "cl-never-existed"},
	} {
		_, _, err := runCLI(t, args...)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), `"cl-never-existed": unknown cluster: the peers this cluster knows are cl-`, "%v", args)
	}
	_, errOut = mustCLI(t, "delete", "resourceslice", "x", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
	assert.Contains(t, errOut, "There is no ResourceSlice "+wire.TenantNamespaceName(provider.id)+"/x: nothing to remove")

	out, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", provider.cp.Kubeconfig, "--consumer-cluster-id", consumer.id)
	pu := filepath.Join(t.TempDir(), "pu.kubeconfig")
	require.NoError(t, os.WriteFile(pu, []byte(out), 0o600))
	mustCLI(t, "delete", "peering-user", "--kubeconfig", provider.cp.Kubeconfig, "--consumer-cluster-id", consumer.id)
	_, errOut = mustCLI(t, "delete", "peering-user", "--kubeconfig", provider.cp.Kubeconfig, "--consumer-cluster-id", consumer.id)
	assert.Contains(t, errOut, `Cluster "`+consumer.id+`" has no peering user: nothing to remove`)
	_, _, err := runCLI(t, "authenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", pu)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(remote) reading its cluster ID: peering user liqo-peer-user-"+consumer.id)
	assert.Contains(t, err.Error(), "it was deleted (liqoctl delete peering-user)")
	assert.Contains(t, err.Error(), "liqoctl generate peering-user --consumer-cluster-id "+consumer.id)
}

// TestInstallManagerReadiness: install --with-manager says plainly that the manager does
// not run yet (these control planes have no node, so it never will); with --wait it waits
// within --timeout and fails saying what its Pods wait for, as helm install --wait does.
func TestInstallManagerReadiness(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "manager-readiness")[0]
	_, errOut := mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", "cl-m", "--with-manager", "--manager-image", "example.com/m:1")
	assert.Contains(t, errOut, "liqo-auth-manager deployed with image example.com/m:1")
	assert.Contains(t, errOut, "liqo-auth-manager is not running yet (0/2 replicas available")
	assert.Contains(t, errOut, "kubectl -n liqo rollout status deployment/liqo-auth-manager")
	start := time.Now()
	_, _, err := runCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--with-manager", "--manager-image", "example.com/m:1", "--wait", "--timeout", "5s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "liqo-auth-manager is not ready after 5s: 0/2 replicas available: ")
	assert.Less(t, time.Since(start), 30*time.Second)
	_, _, err = runCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--wait")
	require.ErrorContains(t, err, "--wait goes with --with-manager")
}
