package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// TestWatchSyncsWithTheInitialObjects pins down the contract of wiring.Watch,
// the source every controller uses: when WaitForSync returns, every object the
// cache held that passes the predicates is already in the queue; a controller
// starts no worker before that; a kind that cannot be watched fails the start at
// once, with the reason, instead of running into the controller's sync timeout.
func TestWatchSyncsWithTheInitialObjects(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "watch")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t, cp.Config)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}))
	for i := range 7 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "watched", Name: fmt.Sprintf("s%d", i)}}
		if i < 5 {
			s.Labels = map[string]string{"picked": "true"}
		}
		require.NoError(t, c.Create(ctx, s))
	}

	newCache := func(t *testing.T, cfg *rest.Config, s *runtime.Scheme) cache.Cache {
		t.Helper()
		ch, err := cache.New(cfg, cache.Options{Scheme: s})
		require.NoError(t, err)
		cctx, stop := context.WithCancel(ctx)
		t.Cleanup(stop)
		go func() { _ = ch.Start(cctx) }()
		require.True(t, ch.WaitForCacheSync(cctx))
		return ch
	}
	newQueue := func(t *testing.T) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		return q
	}

	t.Run("initial objects are queued when it syncs", func(t *testing.T) {
		ch := newCache(t, cp.Config, scheme.New())
		// The first round creates the informer; the later ones find it running.
		for round := range 3 {
			q := newQueue(t)
			w := wiring.Watch(ch, &corev1.Secret{}, &handler.EnqueueRequestForObject{}, wiring.HasLabel("picked", "true"))
			require.NoError(t, w.Start(ctx, q))
			require.NoError(t, w.WaitForSync(ctx), "round %d", round)
			require.Equal(t, 5, q.Len(), "round %d: the queue must hold every labelled Secret when WaitForSync returns", round)
			require.NoError(t, w.WaitForSync(ctx), "a second WaitForSync gets the same answer")
		}
	})

	t.Run("a controller starts its workers only once its sources synced", func(t *testing.T) {
		// The documented contract wiring.Watch relies on for its speed: a controller calls
		// a SyncingSource's WaitForSync before any worker runs. If an upgrade of
		// controller-runtime changed it, this fails.
		ch := newCache(t, cp.Config, scheme.New())
		gate := &gatedSource{SyncingSource: wiring.Watch(ch, &corev1.Secret{}, &handler.EnqueueRequestForObject{}), release: make(chan struct{})}
		var reconciled atomic.Int32
		ctl, err := controller.NewUnmanaged("gated", controller.Options{SkipNameValidation: ptr.To(true),
			Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				reconciled.Add(1)
				return reconcile.Result{}, nil
			})})
		require.NoError(t, err)
		require.NoError(t, ctl.Watch(gate))
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = ctl.Start(cctx) }()
		require.Eventually(t, gate.waiting.Load, 10*time.Second, 5*time.Millisecond, "the controller waits for the source")
		time.Sleep(200 * time.Millisecond)
		require.Zero(t, reconciled.Load(), "no worker ran before WaitForSync returned")
		close(gate.release)
		require.Eventually(t, func() bool { return reconciled.Load() == 7 }, 10*time.Second, 5*time.Millisecond, "then every Secret is reconciled")
	})

	t.Run("a kind outside the scheme fails at once", func(t *testing.T) {
		ch := newCache(t, cp.Config, clientgoscheme.Scheme)
		w := wiring.Watch(ch, &authv1beta1.Tenant{}, &handler.EnqueueRequestForObject{})
		require.NoError(t, w.Start(ctx, newQueue(t)))
		err := w.WaitForSync(ctx)
		require.ErrorContains(t, err, "watching *v1beta1.Tenant")
		require.ErrorContains(t, err, "no kind is registered")
		require.NoError(t, ctx.Err(), "WaitForSync waited for its context instead of failing")
	})

	t.Run("a kind whose CRD is not installed fails at once", func(t *testing.T) {
		ch := newCache(t, cp.Config, scheme.New())
		w := wiring.Watch(ch, &authv1beta1.Identity{}, &handler.EnqueueRequestForObject{})
		require.NoError(t, w.Start(ctx, newQueue(t)))
		err := w.WaitForSync(ctx)
		require.True(t, meta.IsNoMatchError(err), "%v", err)
		require.NoError(t, ctx.Err())
	})

	t.Run("the controller's sync timeout ends a wait that cannot succeed", func(t *testing.T) {
		// A user who may not list ConfigMaps: the informer never syncs.
		cfg, err := cp.UserConfig("watch-nobody")
		require.NoError(t, err)
		ch := newCache(t, cfg, scheme.New())
		w := wiring.Watch(ch, &corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
		require.NoError(t, w.Start(ctx, newQueue(t)))
		syncTimeout, cancelSync := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancelSync()
		err = w.WaitForSync(syncTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "timed out waiting for the watch on *v1.ConfigMap to sync")
	})
}

// gatedSource holds WaitForSync until release is closed.
type gatedSource struct {
	source.SyncingSource
	release chan struct{}
	waiting atomic.Bool
}

func (g *gatedSource) WaitForSync(ctx context.Context) error {
	g.waiting.Store(true)
	<-g.release
	return g.SyncingSource.WaitForSync(ctx)
}
