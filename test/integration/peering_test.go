package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/peering"
)

// declaredPeering is the Peering and its bootstrap Secret, as a GitOps tool applies them.
func declaredPeering(name, secret string, kubeconfig []byte, providerID string) (*authv1beta1.Peering, *corev1.Secret) {
	p := &authv1beta1.Peering{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: name},
		Spec: authv1beta1.PeeringSpec{BootstrapSecretRef: corev1.LocalObjectReference{Name: secret}}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: secret,
		Labels: map[string]string{wire.RemoteClusterIDLabel: providerID}},
		Data: map[string][]byte{peering.KubeconfigKey: kubeconfig}}
	return p, s
}

// waitPeering waits until the Peering's Ready condition has reason, and returns it.
func waitPeering(t *testing.T, c client.Client, name, reason string, timeout time.Duration) *authv1beta1.Peering {
	t.Helper()
	p := &authv1beta1.Peering{}
	eventually(t, timeout, "Peering "+name+" reaches reason "+reason, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: name}, p); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, authv1beta1.ConditionReady)
		if cond == nil {
			return false, nil
		}
		if cond.Reason != reason {
			return false, fmt.Errorf("state %s, reason %s: %s", p.Status.State, cond.Reason, cond.Message)
		}
		return true, nil
	})
	return p
}

// peeringEvents are the notes of the Events recorded on Peering name.
func peeringEvents(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, c.List(context.Background(), &list, client.InNamespace(wire.DefaultLiqoNamespace)))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Peering" && e.Regarding.Name == name {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestDeclarativePeering: the consumer's administrator declares a peering with kubectl
// apply alone (a Peering, then its bootstrap Secret, in the wrong order on purpose), with
// a manager on each side; the consumer's manager carries out the handshake, reports each
// step, and the identity works. Re-applying the consumed Secret changes nothing; deleting
// the Peering leaves the provider, proven.
func TestDeclarativePeering(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()

	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("to-provider", "provider-bootstrap", []byte(kubeconfig), p.id)

	require.NoError(t, c.client.Create(ctx, pe), "the Peering first")
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonBootstrapSecretMissing, 20*time.Second)
	require.NoError(t, c.client.Create(ctx, s), "its Secret after it")
	got := waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
	assert.Equal(t, authv1beta1.PeeringPeered, got.Status.State)
	assert.Equal(t, authv1beta1.ClusterID(p.id), got.Status.ProviderClusterID)
	require.NotNil(t, got.Status.Certificate)
	assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	notes := strings.Join(peeringEvents(t, c.client, pe.Name), "\n")
	for _, step := range []string{"(remote) Nonce generated successfully", "(local) Nonce is signed", "(remote) Tenant status is filled", "(local) Identity status is filled"} {
		assert.Contains(t, notes, step, "each step of the handshake is an Event on the Peering")
	}

	t.Run("the bootstrap credential retired itself", func(t *testing.T) {
		got := waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
		eventually(t, 30*time.Second, "Peering "+pe.Name+" says whether its bootstrap credential retired", func(ctx context.Context) (bool, error) {
			err := c.client.Get(ctx, client.ObjectKeyFromObject(got), got)
			return err == nil && meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionBootstrapRetired) != nil, err
		})
		retired := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionBootstrapRetired)
		require.NotNil(t, retired)
		assert.Equal(t, metav1.ConditionTrue, retired.Status, "%s: %s", retired.Reason, retired.Message)
		assert.Equal(t, authv1beta1.ReasonBootstrapRetired, retired.Reason)
		require.NotNil(t, got.Status.Bootstrap)
		assert.NotNil(t, got.Status.Bootstrap.Retired)
		peer := newClient(t, restConfigFromKubeconfig(t, []byte(kubeconfig)))
		err := peer.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.ClusterIDConfigMapName}, &corev1.ConfigMap{})
		assert.True(t, apierrors.IsForbidden(err), "the retired peering user reads nothing: %v", err)
		err = peer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: wire.TenantNamespaceName(c.id), Name: wire.NonceSecretName,
			Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: c.id}}})
		assert.True(t, apierrors.IsForbidden(err), "the retired peering user writes nothing: %v", err)
	})

	t.Run("re-applying the consumed Secret runs no handshake", func(t *testing.T) {
		var before authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &before))
		var cur corev1.Secret
		require.NoError(t, c.client.Get(ctx, client.ObjectKeyFromObject(s), &cur))
		cur.Annotations = map[string]string{"argocd.argoproj.io/sync": time.Now().String()}
		require.NoError(t, c.client.Update(ctx, &cur))
		time.Sleep(2 * time.Second)
		var after authv1beta1.Tenant
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(&before), &after))
		assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the provider's Tenant is untouched")
		waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
	})

	t.Run("deleting the Peering leaves the provider", func(t *testing.T) {
		require.NoError(t, c.client.Delete(ctx, pe))
		eventually(t, 30*time.Second, "the Peering is gone", func(ctx context.Context) (bool, error) {
			err := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &authv1beta1.Peering{})
			return apierrors.IsNotFound(err), err
		})
		err := p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
		assert.True(t, apierrors.IsNotFound(err), "the Tenant is gone on the provider: %v", err)
		err = c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &authv1beta1.Identity{})
		assert.True(t, apierrors.IsNotFound(err), "the Identity is gone on the consumer: %v", err)
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: c.id, Groups: []string{wire.UserGroup, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.liqo.io", Resource: "resourceslices", Namespace: wire.TenantNamespaceName(c.id)}}}
		require.NoError(t, p.client.Create(ctx, sar))
		assert.False(t, sar.Status.Allowed, "the consumer's user holds nothing on the provider any more")
		notes := strings.Join(peeringEvents(t, c.client, pe.Name), "\n")
		assert.Contains(t, notes, "revoked", "the proof of the revocation is reported")
	})
}

// mutateKubeconfig returns kubeconfig changed by mutate.
func mutateKubeconfig(t *testing.T, kubeconfig []byte, mutate func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	mutate(cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo])
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return out
}

// expiredPeeringUser is a peering user certificate of consumerID signed by ca that
// expired an hour ago, with its key, in PEM.
func expiredPeeringUser(t *testing.T, ca *testenv.CA, consumerID string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: wire.PeeringUserName(consumerID, "0ld0ld00"), Organization: []string{wire.UserGroup}},
		NotBefore: now.Add(-3 * time.Hour), NotAfter: now.Add(-time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// TestDeclarativePeeringBadInput: each bad bootstrap input is a condition with a reason
// that says what to do, and nothing is written on the provider; then a good one peers.
func TestDeclarativePeeringBadInput(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	startManager(t, p, "--api-server-url", p.cp.URL)
	startManager(t, c)
	ctx := context.Background()
	good, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pwned := filepath.Join(t.TempDir(), "pwned") // what the exec plugin would make, were it run
	expCert, expKey := expiredPeeringUser(t, p.cp.CA, c.id)
	adminCert, adminKey, err := p.cp.CA.Issue("cluster-admin-ish", []string{"system:masters"}, nil, nil)
	require.NoError(t, err)
	otherCert, otherKey, err := p.cp.CA.Issue(wire.PeeringUserName("cl-someone-else", "abcd0123"), []string{wire.UserGroup}, nil, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		name, reason, says string
		kubeconfig         []byte
		spec               func(*authv1beta1.PeeringSpec)
	}{
		{name: "exec-plugin", reason: authv1beta1.ReasonBootstrapCredentialRefused, says: "an exec credential plugin",
			kubeconfig: mutateKubeconfig(t, []byte(good), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "touch " + pwned}, APIVersion: "client.authentication.k8s.io/v1"}
			})},
		{name: "not-yaml", reason: authv1beta1.ReasonBootstrapCredentialInvalid, says: "cannot be parsed", kubeconfig: []byte("{{ not a kubeconfig")},
		{name: "admin", reason: authv1beta1.ReasonBootstrapCredentialRefused, says: "not as a peering user",
			kubeconfig: mutateKubeconfig(t, []byte(good), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = adminCert, adminKey
			})},
		{name: "another-consumer", reason: authv1beta1.ReasonBootstrapCredentialRefused, says: "liqoctl generate peering-user --consumer-cluster-id " + c.id,
			kubeconfig: mutateKubeconfig(t, []byte(good), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = otherCert, otherKey
			})},
		{name: "expired", reason: authv1beta1.ReasonBootstrapExpired, says: "ask the provider's administrator for a new one",
			kubeconfig: mutateKubeconfig(t, []byte(good), func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = expCert, expKey
			})},
		{name: "unreachable", reason: authv1beta1.ReasonProviderUnreachable, says: "cannot reach the API server",
			kubeconfig: mutateKubeconfig(t, []byte(good), func(cl *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { cl.Server = "https://127.0.0.1:1" })},
		{name: "wrong-ca-pin", reason: authv1beta1.ReasonProviderCAMismatch, says: "nothing was sent to that server", kubeconfig: []byte(good),
			spec: func(s *authv1beta1.PeeringSpec) { s.ProviderCAFingerprint = "sha256:" + strings.Repeat("ab", 32) }},
		{name: "wrong-provider-pin", reason: authv1beta1.ReasonProviderMismatch, says: "spec.providerClusterID pins", kubeconfig: []byte(good),
			spec: func(s *authv1beta1.PeeringSpec) { s.ProviderClusterID = "cl-elsewhere" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pe, s := declaredPeering("bad-"+tc.name, "bad-"+tc.name, tc.kubeconfig, p.id)
			if tc.spec != nil {
				tc.spec(&pe.Spec)
			}
			require.NoError(t, c.client.Create(ctx, s))
			require.NoError(t, c.client.Create(ctx, pe))
			got := waitPeering(t, c.client, pe.Name, tc.reason, 20*time.Second)
			assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady).Message, tc.says)
			require.NoError(t, c.client.Delete(ctx, pe))
			eventually(t, 10*time.Second, "a Peering that never peered is deleted at once", func(ctx context.Context) (bool, error) {
				getErr := c.client.Get(ctx, client.ObjectKeyFromObject(pe), &authv1beta1.Peering{})
				return apierrors.IsNotFound(getErr), getErr
			})
		})
	}
	_, err = os.Stat(pwned)
	assert.True(t, os.IsNotExist(err), "the exec plugin never ran")
	err = p.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "no bad input wrote a Tenant on the provider: %v", err)

	t.Run("a deleted peering user", func(t *testing.T) {
		mustCLI(t, "delete", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		pe, s := declaredPeering("deleted-user", "deleted-user", []byte(good), p.id)
		require.NoError(t, c.client.Create(ctx, s))
		require.NoError(t, c.client.Create(ctx, pe))
		got := waitPeering(t, c.client, pe.Name, authv1beta1.ReasonBootstrapCredentialRefused, 20*time.Second)
		assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady).Message, "liqoctl generate peering-user --consumer-cluster-id "+c.id)

		// Nothing is lost: a new peering user in the same Secret, and the same Peering peers.
		fresh, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		s.Data[peering.KubeconfigKey] = []byte(fresh)
		require.NoError(t, c.client.Update(ctx, s))
		waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	})
}

// TestPeeringStatusWriterCannotChooseWhatIsLeft: a consumer declares two peerings; a status
// writer rewrites the first Peering's status to name the second provider, then the
// administrator deletes the first Peering. The consumer leaves the provider its tenant
// record says the first Peering peered with, never the one the forged status names: the
// second peering keeps working.
func TestPeeringStatusWriterCannotChooseWhatIsLeft(t *testing.T) {
	t.Parallel()
	sites := installedSites(t, []string{"consumer", "provider-a", "provider-b"}, []string{"cl-consumer", "cl-provider-a", "cl-provider-b"})
	c, pa, pb := sites[0], sites[1], sites[2]
	startManager(t, pa, "--api-server-url", pa.cp.URL)
	startManager(t, pb, "--api-server-url", pb.cp.URL)
	startManager(t, c)
	ctx := context.Background()
	for _, pr := range []*site{pa, pb} {
		kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", pr.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		pe, s := declaredPeering("to-"+pr.id, "bootstrap-"+pr.id, []byte(kubeconfig), pr.id)
		require.NoError(t, c.client.Create(ctx, s))
		require.NoError(t, c.client.Create(ctx, pe))
	}
	waitPeering(t, c.client, "to-"+pa.id, authv1beta1.ReasonPeered, 30*time.Second)
	waitPeering(t, c.client, "to-"+pb.id, authv1beta1.ReasonPeered, 30*time.Second)

	statusWriter := principal(t, c, "peering-status-writer", "", rule("authentication.liqo.io", "peerings/status", "get", "update", "patch"), rule("authentication.liqo.io", "peerings", "get"))
	// The controller writes the status back at once: the forgery is repeated until the
	// deletion below has been decided.
	forge := func() {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var pe authv1beta1.Peering
			if err := statusWriter.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: "to-" + pa.id}, &pe); err != nil {
				return err
			}
			pe.Status.ProviderClusterID = authv1beta1.ClusterID(pb.id)
			pe.Status.TenantNamespace = wire.TenantNamespaceName(pb.id)
			pe.Status.Identity = wire.IdentityName(pb.id)
			return statusWriter.Status().Update(ctx, &pe)
		})
	}
	forge()
	require.NoError(t, c.client.Delete(ctx, &authv1beta1.Peering{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: "to-" + pa.id}}))
	forge()
	eventually(t, 30*time.Second, "the first Peering is gone", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: "to-" + pa.id}, &authv1beta1.Peering{})
		return apierrors.IsNotFound(err), err
	})
	err := pa.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "the consumer left provider a, which its record names: %v", err)
	require.NoError(t, pb.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{}),
		"provider b, which only the forged status named, keeps its Tenant")
	waitPeering(t, c.client, "to-"+pb.id, authv1beta1.ReasonPeered, 30*time.Second)
	assertTenantAccess(t, pb, c, kubeconfigOf(t, c, pb))
}

// TestPeeringCRDInstalledLate: a manager started on a cluster without the Peering CRD (an
// older installation) runs as before; once the CRD is installed it ends itself, to be
// started again (as its Deployment does), and the Peering applied meanwhile converges.
func TestPeeringCRDInstalledLate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: wire.PeeringsCRDName}}
	require.NoError(t, c.client.Delete(ctx, crd))
	eventually(t, 20*time.Second, "the Peering CRD is gone", func(ctx context.Context) (bool, error) {
		err := c.client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), err
	})
	startManager(t, p, "--api-server-url", p.cp.URL)
	m := startManager(t, c)
	assert.Contains(t, m.Logs(), "the Peering CRD is not installed")
	// The manager without Peerings still does its other work: a handshake through it.
	mustCLI(t, pairArgs("authenticate", c, p)...)
	mustCLI(t, pairArgs("unauthenticate", c, p)...)

	mustCLI(t, "install", "--kubeconfig", c.cp.Kubeconfig, "--cluster-id", c.id)
	select {
	case <-m.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the manager did not end once the Peering CRD was installed:\n%s", m.Logs())
	}
	assert.Contains(t, m.Logs(), "the Peering CRD is now installed: restarting to carry out Peerings")
	kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
	pe, s := declaredPeering("late", "late", []byte(kubeconfig), p.id)
	require.NoError(t, c.client.Create(ctx, pe))
	require.NoError(t, c.client.Create(ctx, s))
	startManager(t, c)
	waitPeering(t, c.client, pe.Name, authv1beta1.ReasonPeered, 30*time.Second)
}

// TestDeclarativePeeringApproval: on a provider that requires approval, a declared
// peering waits (WaitingForApproval) without blocking its manager, becomes Peered once
// the provider's administrator approves it, and another consumer's is denied with the
// administrator's reason.
func TestDeclarativePeeringApproval(t *testing.T) {
	t.Parallel()
	sites := installedSites(t, []string{"provider", "consumer-a", "consumer-b"}, []string{"cl-provider", "cl-consumer-a", "cl-consumer-b"})
	p, ca, cb := sites[0], sites[1], sites[2]
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	startManager(t, p, "--api-server-url", p.cp.URL)
	ctx := context.Background()
	for _, c := range []*site{ca, cb} {
		startManager(t, c)
		kubeconfig, _ := mustCLI(t, "generate", "peering-user", "--kubeconfig", p.cp.Kubeconfig, "--consumer-cluster-id", c.id)
		pe, s := declaredPeering("to-provider", "bootstrap", []byte(kubeconfig), p.id)
		require.NoError(t, c.client.Create(ctx, s))
		require.NoError(t, c.client.Create(ctx, pe))
	}
	for _, c := range []*site{ca, cb} {
		got := waitPeering(t, c.client, "to-provider", authv1beta1.ReasonPeeringWaitingForApproval, 30*time.Second)
		assert.Equal(t, authv1beta1.PeeringWaitingForApproval, got.Status.State)
		assert.Contains(t, meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady).Message, "liqoctl approve tenant "+c.id)
	}
	mustCLI(t, "approve", "tenant", ca.id, "--kubeconfig", p.cp.Kubeconfig)
	mustCLI(t, "deny", "tenant", cb.id, "--kubeconfig", p.cp.Kubeconfig, "--reason", "not a customer of ours")
	waitPeering(t, ca.client, "to-provider", authv1beta1.ReasonPeered, 30*time.Second)
	assertTenantAccess(t, p, ca, kubeconfigOf(t, ca, p))
	denied := waitPeering(t, cb.client, "to-provider", authv1beta1.ReasonPeeringDenied, 30*time.Second)
	assert.Contains(t, meta.FindStatusCondition(denied.Status.Conditions, authv1beta1.ConditionReady).Message, "not a customer of ours")
}

// installedSites starts a control plane per name and installs liqo-auth on each with the
// cluster ID of the same rank, as an administrator does with liqoctl install.
func installedSites(t *testing.T, names, ids []string) []*site {
	t.Helper()
	cps := testenv.New(t, names...)
	sites := make([]*site, len(cps))
	for i, cp := range cps {
		mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig, "--cluster-id", ids[i])
		sites[i] = &site{cp: cp, id: ids[i], client: newClient(t, cp.Config)}
	}
	return sites
}
