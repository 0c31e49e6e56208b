package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Attacks on the three changes over cf4d867: the tenant controller's finalizer, access and
// certificate carried out at once (carryOutAccepted, startCheckSubmission); liqoctl's
// RESTMapper and connection gate; authenticate ensuring the tenant namespaces while it
// reads the state and skipping the CA pin when an early read shows it. Each test asserts
// the secure behaviour: it passes when the attack is refused.

// attack47Provider is one provider with its controllers in-process.
func attack47Provider(t *testing.T, name string) *site {
	t.Helper()
	p := installSites(t, testenv.New(t, name), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	return p
}

// controlledBindings are the RoleBindings in ns whose controller is uid.
func controlledBindings(t *testing.T, p *site, ns string, uid string) []string {
	t.Helper()
	var rbs rbacv1.RoleBindingList
	require.NoError(t, p.client.List(context.Background(), &rbs, client.InNamespace(ns)))
	var out []string
	for _, b := range rbs.Items {
		if ref := metav1.GetControllerOf(&b); ref != nil && string(ref.UID) == uid {
			out = append(out, b.Name)
		}
	}
	return out
}

// TestAttack47TenantDeletedWhileAccessIsGranted: a Tenant writer in the tenant namespace
// (the consumer's peering user, holding a valid handshake: its key and a fresh nonce)
// creates its Tenant with a finalizer of its own and deletes it while the manager carries
// out the acceptance. Before the change, the finalizer's patch came first: on a Tenant
// being deleted it is refused ("no new finalizers can be added if the object is being
// deleted") and nothing was granted. Now the Role and bindings are made beside that patch.
// Secure behaviour: a Tenant in deletion keeps no binding granting its cluster ID anything
// once the manager settled (its finalizer is not there to remove them, and the garbage
// collector waits for the foreign finalizer, which the attacker never removes).
//
// The window is hit with an oracle the attacker does not need (it only has to try often
// enough): the test watches the tenant record and deletes the Tenant the moment its nonce
// is consumed, which the manager does right before carryOutAccepted.
func TestAttack47TenantDeletedWhileAccessIsGranted(t *testing.T) {
	// Serial: its tries settle for 3 s before the leftovers are counted: a manager slowed by other tests would look like a leak.
	p := attack47Provider(t, "a47-delete")
	ctx := context.Background()
	const hold = "attacker.example/hold"
	var leftovers []string
	for i := range 12 {
		id := fmt.Sprintf("cl-del%d", i)
		a := newAttacker(t, id)
		tn, nonce := freshNonce(t, p, id)
		writer := principal(t, p, "tenant-writer", tn, rule(authv1beta1.GroupVersion.Group, "tenants", "create", "get", "delete"))
		tenant := a.honestTenant(t, tn, nonce)
		tenant.Finalizers = []string{hold}

		w, err := p.client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(wire.DefaultLiqoNamespace),
			client.MatchingFields{"metadata.name": wire.TenantRecordName(id)})
		require.NoError(t, err)
		require.NoError(t, writer.Create(ctx, tenant))
		uid := string(tenant.UID)
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				for _, v := range cm.Data {
					if strings.Contains(v, uid) {
						if i%3 != 0 {
							time.Sleep(time.Duration(i%3) * time.Millisecond)
						}
						break wait
					}
				}
			case <-deadline:
				break wait
			}
		}
		w.Stop()
		require.NoError(t, writer.Delete(ctx, tenant))
		// Settle: the manager's reconciles (the failed one, then the deletion's) and the
		// garbage collector.
		time.Sleep(3 * time.Second)
		got := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tenant), got), "the foreign finalizer holds the Tenant")
		require.NotNil(t, got.DeletionTimestamp)
		if left := controlledBindings(t, p, tn, uid); len(left) > 0 {
			allowed, err := revocation.AllowedActions(ctx, p.client, id, []string{wire.UserGroup}, tn, access.ControlPlaneRules())
			require.NoError(t, err)
			leftovers = append(leftovers, fmt.Sprintf("Tenant %s/%s (finalizers %v, deleted at %s): bindings %v remain; user %q may still %v",
				tn, id, got.Finalizers, got.DeletionTimestamp.UTC().Format(time.RFC3339), left, id, allowed))
			// One is enough to show it; a few more say it is not a fluke.
			if len(leftovers) >= 2 {
				break
			}
		}
	}
	assert.Empty(t, leftovers, "a Tenant in deletion keeps no binding: what it was granted while its finalizer's patch was refused stays for as long as the attacker's finalizer")
}

// TestAttack47SignerLateRacesTheCheck: the reviews of what the cluster ID may do now run in
// a goroutine started before the request is looked up (startCheckSubmission). When the
// manager's request already exists and is approved (the signer answered after the
// reconcile that approved it stopped waiting), the issuer does not wait for that
// goroutine: the certificate is recorded, published and the status saved (the API
// server's answer decoded into the very Tenant the goroutine reads) while it still runs.
// No principal is needed beyond a slow signer (here the kube-controller-manager, paused
// then resumed); a ClusterRoleBinding writer who binds the cluster ID meanwhile makes the
// goroutine read the Tenant after its reviews too. Run with -race: the detector reports
// the unsynchronised accesses and fails the test; without -race it checks that the
// certificate is issued all the same (what the issuer decides for an approved request).
func TestAttack47SignerLateRacesTheCheck(t *testing.T) {
	t.Parallel()
	p := attack47Provider(t, "a47-race")
	ctx := context.Background()
	kcm := p.cp.ProcessIDs()["kube-controller-manager"]
	require.NotZero(t, kcm)
	require.NoError(t, syscall.Kill(kcm, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			require.NoError(t, syscall.Kill(kcm, syscall.SIGCONT))
		}
	}
	t.Cleanup(resume)

	a := newAttacker(t, "cl-late")
	tn, nonce := freshNonce(t, p, a.id)
	tenant := a.honestTenant(t, tn, nonce)
	require.NoError(t, p.client.Create(ctx, tenant))
	key := client.ObjectKeyFromObject(tenant)
	waitTenantCondition(t, p, key, authv1beta1.ConditionCertificateIssued, metav1.ConditionFalse, authv1beta1.ReasonCertificatePending)
	// The request is approved, not signed. A ClusterRoleBinding writer binds the cluster ID
	// now: the reviews the next reconcile starts find it and read the Tenant once more.
	require.NoError(t, p.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "a47-late-view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: a.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}))
	time.Sleep(500 * time.Millisecond)
	resume()
	waitTenantCondition(t, p, key, authv1beta1.ConditionCertificateIssued, metav1.ConditionTrue, authv1beta1.ReasonCertificateIssued)
	time.Sleep(time.Second)
}

// TestAttack47PreCreatedTenantNamespace: a namespace creator (who may also create Tenants
// anywhere) makes liqo-tenant-<consumer> on the provider ahead of the administrator and
// plants a Tenant in it. authenticate now ensures the tenant namespaces while it reads the
// pair's state, and skips the Tenant's read in a namespace it says it created: the
// namespace must still be refused without --adopt-tenant-namespace (nothing recorded,
// nothing of the consumer's written in it), and, adopted, it is said aloud and the
// planted Tenant is read (never taken for a namespace made now).
func TestAttack47PreCreatedTenantNamespace(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mallory := principal(t, provider, "ns-creator", "", rule("", "namespaces", "create", "get"), rule("authentication.liqo.io", "tenants", "create", "get"))
	tn := wire.TenantNamespaceName(consumer.id)
	require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn}}))
	someNonce, err := authn.NewNonce()
	require.NoError(t, err)
	planted := newAttacker(t, consumer.id).honestTenant(t, tn, someNonce)
	require.NoError(t, mallory.Create(ctx, planted))

	_, errOut, err := runCLI(t, pairArgs("authenticate", consumer, provider)...)
	require.Error(t, err, "a namespace made by someone else is refused:\n%s", errOut)
	assert.Contains(t, err.Error(), "--adopt-tenant-namespace")
	rec, err := cluster.GetTenantRecord(ctx, provider.client, wire.DefaultLiqoNamespace, consumer.id)
	require.NoError(t, err)
	assert.True(t, rec == nil || rec.Namespace == "", "nothing is recorded: %+v", rec)
	var nonce corev1.Secret
	assert.True(t, apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &nonce)), "no nonce is written in the squatted namespace")
	got := &authv1beta1.Tenant{}
	require.NoError(t, provider.client.Get(ctx, client.ObjectKeyFromObject(planted), got))
	assert.Equal(t, planted.Spec.PublicKey, got.Spec.PublicKey, "the planted Tenant is left as it was")

	// Adopted on the administrator's word: said aloud, and the namespace is not one made now.
	_, errOut, err = runCLI(t, pairArgs("authenticate", consumer, provider, "--adopt-tenant-namespace")...)
	assert.Contains(t, errOut, "is adopted as the tenant namespace", "adoption is said aloud")
	t.Logf("authenticate --adopt-tenant-namespace: err=%v\n%s", err, errOut)
	if err == nil {
		// The planted Tenant was read (and replaced by the consumer's own); the certificate
		// is the consumer's key's.
		require.NoError(t, provider.client.Get(ctx, client.ObjectKeyFromObject(planted), got))
		assert.NotEqual(t, planted.Spec.PublicKey, got.Spec.PublicKey, "the planted Tenant's key is not the one authenticated")
	}
}

// TestAttack47PinnedCAStillChecked: authenticate now reads the consumer's pin of the
// provider's CA early and skips PinProviderCA when that early read shows the same
// fingerprint. A provider presenting a CA other than the one the consumer pinned before
// its first handshake (generate tenant --expect-fingerprint, or an earlier peering of a
// provider whose CA was since swapped) must still be refused, the pin kept.
func TestAttack47PinnedCAStillChecked(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	evil, err := testenv.NewCA("evil")
	require.NoError(t, err)
	evilFP, err := authn.CAFingerprint(evil.CertPEM)
	require.NoError(t, err)
	require.NoError(t, cluster.UpdateTenantRecord(ctx, consumer.client, consumer.client, wire.DefaultLiqoNamespace, provider.id, true, func(r *cluster.TenantRecord) error {
		r.CAFingerprint = evilFP
		return nil
	}))
	_, errOut, err := runCLI(t, pairArgs("authenticate", consumer, provider)...)
	require.Error(t, err, "a provider presenting a CA other than the pinned one is refused:\n%s", errOut)
	assert.Contains(t, err.Error(), evilFP)
	rec, err := cluster.GetTenantRecord(ctx, consumer.client, wire.DefaultLiqoNamespace, provider.id)
	require.NoError(t, err)
	assert.Equal(t, evilFP, rec.CAFingerprint, "the pin is kept")
}

// TestAttack47RoleWriterRacesReaderRole: a Role writer of the tenant namespace (who holds
// get on Secrets there, so the API server lets it write such a rule) squats the tenant's
// reader Role with a rule of its own before the handshake, and rewrites it over and over
// while the manager carries out the acceptance (the Role, the bindings and the certificate
// now at once). Once the Tenant is Ready and the writer stops, the tenant's user holds
// exactly the reader's rules: no Secrets. (While the writer keeps going, the manager
// repairs each rewrite on its watch: that short window is as before the change.)
func TestAttack47RoleWriterRacesReaderRole(t *testing.T) {
	// Serial: a flood of Role writes (hammer), then a settle time of 2 s before the Role is checked.
	p := attack47Provider(t, "a47-rolewriter")
	ctx := context.Background()
	a := newAttacker(t, "cl-squat47")
	tn, nonce := freshNonce(t, p, a.id)
	secretsGet := rule("", "secrets", "get")
	broad := append(access.TenantReaderRules(a.id), secretsGet)
	mallory := principal(t, p, "role-writer", tn, append([]rbacv1.PolicyRule{rule("rbac.authorization.k8s.io", "roles", "create", "get", "update", "delete")}, broad...)...)
	require.NoError(t, mallory.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantReaderName, Namespace: tn}, Rules: broad}))

	stop := hammer(func(int) bool {
		r := &rbacv1.Role{}
		if err := mallory.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.TenantReaderName}, r); err != nil {
			_ = mallory.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantReaderName, Namespace: tn}, Rules: broad})
			return false
		}
		r.Rules = broad
		return mallory.Update(ctx, r) == nil
	})
	tenant := a.honestTenant(t, tn, nonce)
	require.NoError(t, p.client.Create(ctx, tenant))
	key := client.ObjectKeyFromObject(tenant)
	waitTenantCondition(t, p, key, authv1beta1.ConditionCertificateIssued, metav1.ConditionTrue, authv1beta1.ReasonCertificateIssued)
	atIssue, err := revocation.AllowedActions(ctx, p.client, a.id, []string{wire.UserGroup}, tn, []rbacv1.PolicyRule{secretsGet})
	require.NoError(t, err)
	t.Logf("the writer rewrote the Role %d times; at the certificate's publication the user could %v", stop(), atIssue)
	eventually(t, 20*time.Second, "the reader Role is the manager's again", func(ctx context.Context) (bool, error) {
		r := &rbacv1.Role{}
		if getErr := p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.TenantReaderName}, r); getErr != nil {
			return false, client.IgnoreNotFound(getErr)
		}
		got := &authv1beta1.Tenant{}
		if getErr := p.client.Get(ctx, key, got); getErr != nil {
			return false, getErr
		}
		return metav1.IsControlledBy(r, got), nil
	})
	time.Sleep(2 * time.Second)
	allowed, err := revocation.AllowedActions(ctx, p.client, a.id, []string{wire.UserGroup}, tn, []rbacv1.PolicyRule{secretsGet})
	require.NoError(t, err)
	assert.Empty(t, allowed, "the tenant's user may not read Secrets once the writer stopped")
	r := &rbacv1.Role{}
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.TenantReaderName}, r))
	assert.Equal(t, access.TenantReaderRules(a.id), r.Rules)
}

// TestAttack47ConnGateUnreachableProvider: liqoctl's connection gate holds a client's
// requests until its first one is answered. A provider address that accepts connections
// and never answers must not hang the command past its request timeout (no deadlock of
// the requests held behind the first).
func TestAttack47ConnGateUnreachableProvider(t *testing.T) {
	t.Parallel()
	consumer := installSites(t, testenv.New(t, "a47-gate"), "cl-consumer")[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, acceptErr := ln.Accept()
			if acceptErr != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	cfg := rest.CopyConfig(consumer.cp.Config)
	cfg.Host = "https://" + ln.Addr().String()
	kc := filepath.Join(t.TempDir(), "blackhole.kubeconfig")
	require.NoError(t, testenv.WriteKubeconfig(kc, "blackhole", cfg))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, _, err = runCLIContext(ctx, "authenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-kubeconfig", kc, "--remote-request-timeout", "3s")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 60*time.Second, "the command ends within a few request timeouts: %v", err)
	assert.NoError(t, ctx.Err(), "the command ended on its own, not on the test's deadline: %v", err)
}

// hammer calls write again and again in the background, as an attacker racing the
// manager, until the returned stop is called; stop returns how many calls wrote (write
// says whether its call did, and is told how many did before).
func hammer(write func(wrote int) bool) (stop func() int) {
	quit := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for {
			select {
			case <-quit:
				return
			default:
			}
			if write(n) {
				n++
			}
		}
	}()
	return func() int { close(quit); return <-done }
}
