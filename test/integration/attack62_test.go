package integration

// Attack 62: helper-28's attacks on writing the pin and the Identity at once (a change
// measured and not kept: a refused run must not apply its Identity).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestAttack62RefusedProxyPinLeavesTheIdentityApplied: no attacker below the
// administrator; two handshakes of the consumer's own (the administrator's liqoctl
// authenticate, and another handshake that pins meanwhile: a second authenticate, a
// Peering, emulated by the administrator's write of the pin). The consumer peered, was
// unauthenticated (its proxy pin forgotten, its CA pin kept), and the provider now requires
// approval. liqoctl authenticate --tenant-proxy-url P2 reads the record (no proxy pinned)
// and waits for the approval; meanwhile the other handshake pins "no proxy". Once approved,
// the run is refused (ErrProxyChanged). What must hold (docs: ErrProxyChanged "changes
// nothing"): the refused run applied no Identity. Found by helper-28 on a change that
// wrote the pin and the Identity at once, where the Identity with P2 was applied anyway
// and the identity controller refused it (ProxyNotPinned): a refused run overwrote the
// consumer's Identity.
func TestAttack62RefusedProxyPinLeavesTheIdentityApplied(t *testing.T) {
	t.Parallel()
	const p2 = "socks5://proxy-two.example.com:1080"
	refusedWhileApprovalWaits(t, []string{"--tenant-proxy-url", p2}, func(r *cluster.TenantRecord) {
		r.ProxyURL = ptr.To("") // another handshake's way: no proxy
	}, func(t *testing.T, err error) {
		require.ErrorIs(t, err, handshake.ErrProxyChanged)
	})
}

// TestAttack62RefusedCAPinLeavesTheIdentityApplied: as
// TestAttack62RefusedProxyPinLeavesTheIdentityApplied, with the CA: while liqoctl
// authenticate waits for the provider's approval, the consumer's administrator pins
// another provider CA in place of the old (cluster.RepinCACommand, as every CA refusal
// advises: a rotation the provider's administrator announced). The run is refused ("this
// cluster pinned CA ... earlier"); what must hold (docs/security.md, Identity: "the same
// refusal from every handshake that pins"): it applied no Identity. Found by helper-28 on
// a change that wrote the pin and the Identity at once, where an Identity with the CA the
// run refused was applied, and the identity controller refused it (CAFingerprintMismatch).
func TestAttack62RefusedCAPinLeavesTheIdentityApplied(t *testing.T) {
	t.Parallel()
	other, err := testenv.NewCA("provider-after-rotation")
	require.NoError(t, err)
	otherFP, err := authn.CAFingerprint(other.CertPEM)
	require.NoError(t, err)
	refusedWhileApprovalWaits(t, nil, func(r *cluster.TenantRecord) {
		r.CAFingerprint = otherFP
	}, func(t *testing.T, err error) {
		require.Error(t, err)
		require.Contains(t, err.Error(), "this cluster pinned CA "+otherFP)
	})
}

// refusedWhileApprovalWaits peers a consumer with a provider (a manager on each), has the
// provider require approval and unauthenticates (the proxy pin forgotten, the CA pin
// kept); then runs liqoctl authenticate with args, and while it waits for the approval
// changes the consumer's record with meanwhile (an administrator's write: another
// handshake's pin, or a repin), approves, checks the run's refusal with refused, and
// asserts that the refused run left no Identity on the consumer.
func refusedWhileApprovalWaits(t *testing.T, args []string, meanwhile func(*cluster.TenantRecord), refused func(*testing.T, error)) {
	t.Helper()
	c, p := cliSites(t)
	ctx := context.Background()
	startManager(t, p, "--api-server-url", p.cp.URL)
	startControllers(t, c, authmanager.Consumer)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	mustCLI(t, "install", "--kubeconfig", p.cp.Kubeconfig, "--require-approval")
	mustCLI(t, pairArgs("unauthenticate", c, p)...)
	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	require.NotEmpty(t, rec.CAFingerprint, "unauthenticate keeps the CA pin")
	require.Nil(t, rec.ProxyURL, "unauthenticate forgets the proxy pin")

	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type result struct {
		errOut string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, runErr := runCLIContext(actx, pairArgs("authenticate", c, p, args...)...)
		done <- result{errOut, runErr}
	}()
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}
	eventually(t, 60*time.Second, "the new Tenant waits for approval", func(ctx context.Context) (bool, error) {
		var got authv1beta1.Tenant
		if getErr := p.client.Get(ctx, key, &got); getErr != nil {
			return false, client.IgnoreNotFound(getErr)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionApproved)
		return cond != nil && cond.Reason == authv1beta1.ReasonApprovalPending, nil
	})
	require.NoError(t, cluster.UpdateTenantRecord(ctx, c.client, c.client, wire.DefaultLiqoNamespace, p.id, false, func(r *cluster.TenantRecord) error {
		meanwhile(r)
		return nil
	}))
	mustCLI(t, "approve", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)

	r := <-done
	refused(t, r.err)
	t.Logf("authenticate refused: %v", r.err)
	var id authv1beta1.Identity
	err = c.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(p.id), Name: wire.IdentityName(p.id)}, &id)
	if !assert.True(t, apierrors.IsNotFound(err), "the refused run applied an Identity (err %v)", err) {
		t.Logf("Identity left behind: proxy %q", ptr.Deref(id.Spec.AuthParams.ProxyURL, "<nil>"))
		eventually(t, 30*time.Second, "the identity controller decides on it", func(ctx context.Context) (bool, error) {
			if getErr := c.client.Get(ctx, client.ObjectKeyFromObject(&id), &id); getErr != nil {
				return false, getErr
			}
			return meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady) != nil && id.Status.ObservedGeneration == id.Generation, nil
		})
		ready := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
		t.Logf("identity controller: Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
	}
}
