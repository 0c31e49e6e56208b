package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// TestManagersWithoutLeaderElectionAreSeen: a liqo-auth-manager started with
// --leader-elect=false still announces itself in its Lease, so liqoctl leaves the work
// to it instead of starting controllers of its own beside it; once it stops, the Lease is
// released and liqoctl runs the controllers in-process again.
func TestManagersWithoutLeaderElectionAreSeen(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	mc := startManager(t, consumer, "--leader-elect=false")
	mp := startManager(t, provider, "--leader-elect=false")
	for _, s := range []*site{consumer, provider} {
		running, err := authmanager.RunningManager(context.Background(), s.client, wire.DefaultLiqoNamespace, time.Now())
		require.NoError(t, err)
		require.NotNil(t, running, "%s: the manager's Lease is fresh", s.id)
		require.NotEmpty(t, running.Holder)
		require.Equal(t, authmanager.VersionLabels()[authmanager.VersionLabel], running.Version, "the manager announces its version")
	}
	_, errOut := mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	assertInOrder(t, errOut, publishedSteps)
	assert.NotContains(t, errOut, "in-process", "the running managers do the work")
	assertTenantAccess(t, provider, consumer, kubeconfigOf(t, consumer, provider))

	mp.Stop()
	mc.Stop()
	for _, s := range []*site{consumer, provider} {
		running, err := authmanager.RunningManager(context.Background(), s.client, wire.DefaultLiqoNamespace, time.Now())
		require.NoError(t, err)
		require.Nil(t, running, "%s: a stopped manager releases its Lease", s.id)
	}
	_, errOut = mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "in-process", "with the managers gone, liqoctl runs the controllers itself")
	assert.Contains(t, errOut, "Access revoked: verified")
}

// TestPresenceNeverTakesALiveLease: Presence takes the Lease when it is absent, released
// or stale, renews it, releases it when stopped, and leaves alone a Lease another
// manager keeps fresh.
func TestPresenceNeverTakesALiveLease(t *testing.T) {
	t.Parallel()
	consumer, _ := cliSites(t)
	c := consumer.client
	ns := wire.DefaultLiqoNamespace
	key := client.ObjectKey{Namespace: ns, Name: wire.ManagerName}
	get := func(ctx context.Context) (*coordinationv1.Lease, error) {
		var l coordinationv1.Lease
		return &l, c.Get(ctx, key, &l)
	}
	lease := func(t *testing.T) *coordinationv1.Lease {
		t.Helper()
		l, err := get(context.Background())
		require.NoError(t, err)
		return l
	}
	logs := &lockedBuffer{}
	run := func(t *testing.T, id string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		logger := funcr.New(func(prefix, args string) { fmt.Fprintln(logs, id, prefix, args) }, funcr.Options{})
		p := &authmanager.Presence{Client: c, Namespace: ns, Identity: id, Duration: 15 * time.Second, Renew: 50 * time.Millisecond, Logger: logger}
		go func() { done <- p.Start(ctx) }()
		stopped := false
		stop = func() {
			if !stopped {
				stopped = true
				cancel()
				require.NoError(t, <-done)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	holderIs := func(t *testing.T, want string) {
		t.Helper()
		eventually(t, 10*time.Second, "the Lease holder is "+want, func(ctx context.Context) (bool, error) {
			l, err := get(ctx)
			if err != nil {
				return false, client.IgnoreNotFound(err)
			}
			holder, fresh := authmanager.LeaseHolder(l, time.Now())
			return fresh && holder == want, nil
		})
	}

	// No Lease: it creates one, renews it, and releases it when stopped.
	stop := run(t, "presence-a")
	holderIs(t, "presence-a")
	first := lease(t).Spec.RenewTime.Time
	eventually(t, 10*time.Second, "the Lease is renewed", func(ctx context.Context) (bool, error) {
		return lease(t).Spec.RenewTime.After(first), nil
	})
	stop()
	running, err := authmanager.RunningManager(context.Background(), c, ns, time.Now())
	require.NoError(t, err)
	require.Nil(t, running, "released on stop")

	// A released Lease is taken over.
	stop = run(t, "presence-b")
	holderIs(t, "presence-b")
	stop()

	// A Lease another manager keeps fresh is left alone.
	l := lease(t)
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To("elected-leader"), ptr.To(int32(3600)), &now
	require.NoError(t, c.Update(context.Background(), l))
	stop = run(t, "presence-c")
	eventually(t, 10*time.Second, "presence-c has looked at the Lease", func(ctx context.Context) (bool, error) {
		return strings.Contains(logs.String(), "another liqo-auth-manager holds the Lease"), nil
	})
	holder, fresh := authmanager.LeaseHolder(lease(t), time.Now())
	require.True(t, fresh)
	require.Equal(t, "elected-leader", holder)
	stop()
	holder, _ = authmanager.LeaseHolder(lease(t), time.Now())
	require.Equal(t, "elected-leader", holder, "stopping does not release a Lease it does not hold")

	// A stale Lease is taken over.
	l = lease(t)
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To(int32(15)), &old
	require.NoError(t, c.Update(context.Background(), l))
	run(t, "presence-d")
	holderIs(t, "presence-d")
	require.EqualValues(t, 2, ptr.Deref(lease(t).Spec.LeaseTransitions, 0), "each takeover counts as a transition")
}
