package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Environment of the opt-in interop test with Liqo's real binaries (docs/protocol.md §9).
const (
	// EnvLiqoBin is the directory holding Liqo's liqoctl and liqo-controller-manager.
	envLiqoBin = "LIQO_AUTH_LIQO_BIN"
	// EnvLiqoCRDs is the directory of Liqo's CRDs, as its chart ships them.
	envLiqoCRDs = "LIQO_AUTH_LIQO_CRDS"
)

// realLiqo is Liqo's real binaries and CRDs, or a skip.
type realLiqo struct{ bin, crds string }

func liqoBinaries(t *testing.T) realLiqo {
	t.Helper()
	l := realLiqo{bin: os.Getenv(envLiqoBin), crds: os.Getenv(envLiqoCRDs)}
	if l.bin == "" || l.crds == "" {
		t.Skipf("set %s (Liqo's liqoctl and liqo-controller-manager) and %s (its chart's CRDs) to run the interop test with real Liqo", envLiqoBin, envLiqoCRDs)
	}
	for _, b := range []string{"liqoctl", "liqo-controller-manager"} {
		if _, err := os.Stat(filepath.Join(l.bin, b)); err != nil {
			t.Skipf("%s has no %s: %v", envLiqoBin, b, err)
		}
	}
	return l
}

// install makes s a cluster as Liqo's chart installs it, for the authentication module:
// its CRDs, its roles, its cluster ID (cl-liqo) and the record of its Deployment, and runs
// liqo-controller-manager beside it (authentication only) until the test ends.
func (l realLiqo) install(t *testing.T, cp *testenv.ControlPlane) *site {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, cp.Config)
	files, err := filepath.Glob(filepath.Join(l.crds, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "%s holds Liqo's CRDs", l.crds)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		applyYAML(t, c, data)
	}
	require.NoError(t, installer.WaitCRDsEstablished(ctx, c, liqoCRDNames...))
	applyYAML(t, c, liqoFixture(t, "controlplane.yaml"))
	s := &site{cp: cp, id: "cl-liqo", client: c}
	l.run(t, s)
	return s
}

// run starts Liqo's liqo-controller-manager beside site s, with its authentication module
// only, until the test ends.
func (l realLiqo) run(t *testing.T, s *site) {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.bin, "liqo-controller-manager"), "--cluster-id", s.id, "--liqo-namespace", wire.DefaultLiqoNamespace,
		"--authentication-enabled=true", "--networking-enabled=false", "--offloading-enabled=false",
		"--metrics-address=0", "--health-probe-address=0", "--api-server-address-override", s.cp.URL)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.cp.Kubeconfig)
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("liqo-controller-manager on %s:\n%s", s.id, tail(logs.String(), 80))
		}
	})
}

// liqoctl runs Liqo's own liqoctl.
func (l realLiqo) liqoctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(l.bin, "liqoctl"), append(args, "--skip-confirm")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// liqoctlStdout runs Liqo's own liqoctl and returns its stdout alone (the data it prints).
func (l realLiqo) liqoctlStdout(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(l.bin, "liqoctl"), append(args, "--skip-confirm")...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, errOut.String())
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// assertWorkingKubeconfig waits until the consumer holds a kubeconfig Secret for the
// provider that authenticates there as the consumer's cluster ID.
func assertWorkingKubeconfig(t *testing.T, consumer, provider *site, consumerID string, within time.Duration) { //nolint:unparam // the wait is the caller's to state
	t.Helper()
	tn := wire.TenantNamespaceName(provider.id)
	var last string
	ok := false
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && !ok {
		var id authv1beta1.Identity
		err := consumer.client.Get(context.Background(), client.ObjectKey{Namespace: tn, Name: wire.IdentityName(provider.id)}, &id)
		switch {
		case err != nil:
			last = err.Error()
		case id.Status.KubeconfigSecretRef == nil:
			last = "no kubeconfigSecretRef"
		default:
			var s corev1.Secret
			if err := consumer.client.Get(context.Background(), client.ObjectKey{Namespace: tn, Name: id.Status.KubeconfigSecretRef.Name}, &s); err != nil {
				last = err.Error()
				break
			}
			user, err := whoAmI(t, s.Data[wire.KubeconfigField])
			if err != nil {
				last = err.Error()
				break
			}
			ok, last = user == consumerID, "authenticates as "+user
		}
		if !ok {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.True(t, ok, "a working kubeconfig-controlplane-%s within %s (last: %s)", provider.id, within, last)
}

func whoAmI(t *testing.T, kubeconfig []byte) (string, error) {
	t.Helper()
	c := newClient(t, restConfigFromKubeconfig(t, kubeconfig))
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// TestRealLiqoInterop runs this project against Liqo's real liqoctl and
// liqo-controller-manager, both ways, with re-runs and removal (opt-in: docs/protocol.md
// §9 says how to point it at Liqo's binaries).
func TestRealLiqoInterop(t *testing.T) {
	// Serial: it runs Liqo's real controllers, which compute.
	l := liqoBinaries(t)

	t.Run("this consumer, Liqo's provider, again after removal", func(t *testing.T) {
		cps := testenv.New(t, "ours-consumer", "liqo-provider")
		mustCLI(t, "install", "--kubeconfig", cps[0].Kubeconfig, "--cluster-id", "cl-ours")
		consumer := &site{cp: cps[0], id: "cl-ours", client: newClient(t, cps[0].Config)}
		startManager(t, consumer)
		provider := l.install(t, cps[1])
		for round := 1; round <= 2; round++ {
			_, errOut, err := runCLI(t, pairArgs("authenticate", consumer, provider)...)
			require.NoError(t, err, "round %d:\n%s", round, errOut)
			assert.Contains(t, errOut, "(remote) Liqo's controllers run in this cluster")
			assertWorkingKubeconfig(t, consumer, provider, consumer.id, 60*time.Second)
			_, errOut = mustCLI(t, pairArgs("authenticate", consumer, provider)...)
			assert.Contains(t, errOut, "Already authenticated", "round %d: a re-run changes nothing", round)
			_, errOut, err = runCLI(t, pairArgs("unauthenticate", consumer, provider, "--delete-namespaces")...)
			require.NoError(t, err, "round %d:\n%s", round, errOut)
			assert.Contains(t, errOut, "Access revoked: verified")
		}
	})

	// Issue 38 item 7: after the manual flow with Liqo's provider, unauthenticate and the
	// deletion of both tenant namespaces, authenticate against the same provider waited
	// until its timeout. It must complete; when Liqo's controllers refuse to, the error
	// must quote what they said and what to remove.
	t.Run("this consumer, manual flow with Liqo's provider, unauthenticate, namespaces deleted, authenticate", func(t *testing.T) {
		ctx := context.Background()
		cps := testenv.New(t, "ours-manual", "liqo-manual")
		mustCLI(t, "install", "--kubeconfig", cps[0].Kubeconfig, "--cluster-id", "cl-ours")
		consumer := &site{cp: cps[0], id: "cl-ours", client: newClient(t, cps[0].Config)}
		startManager(t, consumer)
		provider := l.install(t, cps[1])
		out, err := l.liqoctl(t, "create", "nonce", "--kubeconfig", provider.cp.Kubeconfig, "--remote-cluster-id", consumer.id)
		require.NoError(t, err, "Liqo's liqoctl create nonce:\n%s", out)
		var nonce corev1.Secret
		eventually(t, 60*time.Second, "Liqo fills the nonce", func(ctx context.Context) (bool, error) {
			getErr := provider.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: wire.NonceSecretName}, &nonce)
			return getErr == nil && len(nonce.Data[wire.NonceField]) > 0, nil
		})
		tenantYAML, _ := mustCLI(t, "generate", "tenant", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "--nonce", string(nonce.Data[wire.NonceField]))
		applyYAML(t, provider.client, []byte(tenantYAML))
		eventually(t, 60*time.Second, "Liqo fills the Tenant's status", func(ctx context.Context) (bool, error) {
			var tn authv1beta1.Tenant
			getErr := provider.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &tn)
			return getErr == nil && tn.Status.AuthParams.HasCertificate(), nil
		})
		identityYAML, err := l.liqoctlStdout(t, "generate", "identity", "--kubeconfig", provider.cp.Kubeconfig, "--remote-cluster-id", consumer.id)
		require.NoError(t, err, "Liqo's liqoctl generate identity")
		// Liqo's YAML names no namespace: its administrator applies it in the tenant
		// namespace of the provider (kubectl apply -n).
		require.Contains(t, identityYAML, "metadata:\n")
		identityYAML = strings.Replace(identityYAML, "metadata:\n", "metadata:\n  namespace: "+wire.TenantNamespaceName(provider.id)+"\n", 1)
		applyYAML(t, consumer.client, []byte(identityYAML))
		assertWorkingKubeconfig(t, consumer, provider, consumer.id, 60*time.Second)
		_, errOut, err := runCLI(t, pairArgs("unauthenticate", consumer, provider)...)
		require.NoError(t, err, errOut)
		for _, s := range []struct {
			site *site
			ns   string
		}{{consumer, wire.TenantNamespaceName(provider.id)}, {provider, wire.TenantNamespaceName(consumer.id)}} {
			require.NoError(t, client.IgnoreNotFound(s.site.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})))
			eventually(t, 60*time.Second, "namespace "+s.ns+" is gone", func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(s.site.client.Get(ctx, client.ObjectKey{Name: s.ns}, &corev1.Namespace{})), nil
			})
		}
		_, errOut, err = runCLI(t, pairArgs("authenticate", consumer, provider, "--timeout", "90s")...)
		if err != nil {
			assert.Contains(t, err.Error(), "Liqo's controllers said", "a refusal by Liqo's controllers is quoted")
			t.Fatalf("the re-peer with Liqo's provider does not complete:\n%s\n%v", errOut, err)
		}
		assertWorkingKubeconfig(t, consumer, provider, consumer.id, 60*time.Second)
	})

	t.Run("Liqo's consumer with Liqo's liqoctl, this provider, again after removal", func(t *testing.T) {
		cps := testenv.New(t, "liqo-consumer", "ours-provider")
		consumer := l.install(t, cps[0])
		mustCLI(t, "install", "--kubeconfig", cps[1].Kubeconfig, "--cluster-id", "cl-ours")
		provider := &site{cp: cps[1], id: "cl-ours", client: newClient(t, cps[1].Config)}
		startManager(t, provider, "--api-server-url", provider.cp.URL)
		for round := 1; round <= 2; round++ {
			out, err := l.liqoctl(t, "authenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", provider.cp.Kubeconfig, "--timeout", "90s")
			require.NoError(t, err, "round %d, Liqo's liqoctl authenticate:\n%s", round, out)
			assertWorkingKubeconfig(t, consumer, provider, consumer.id, 60*time.Second)
			var tn authv1beta1.Tenant
			require.NoError(t, provider.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &tn))
			assert.True(t, meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady), "this provider accepted Liqo's consumer")
			out, err = l.liqoctl(t, "authenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", provider.cp.Kubeconfig, "--timeout", "90s")
			require.NoError(t, err, "round %d, a re-run:\n%s", round, out)
			out, err = l.liqoctl(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", provider.cp.Kubeconfig, "--timeout", "90s")
			require.NoError(t, err, "round %d, Liqo's liqoctl unauthenticate:\n%s", round, out)
		}
	})
}
