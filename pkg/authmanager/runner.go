package authmanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/liqo-auth/liqo-auth/internal/version"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// Runner is a manager running in the background of a process (liqoctl's in-process mode).
type Runner struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error
	// synced is closed once the caches synced, or could not (syncErr).
	synced  chan struct{}
	syncErr error
}

// Connection is an HTTP client and a REST mapper to share with the in-process controllers,
// so that they reuse the command's connection to the API server and what it already
// discovered of the API, instead of opening a second connection and repeating discovery.
// Its zero value makes the controllers create their own.
type Connection struct {
	HTTPClient *http.Client
	Mapper     meta.RESTMapper
}

// Start starts the selected controllers against cfg in the background and returns as soon
// as they are set up, while their caches fill; WaitSynced says when they are ready (a
// command whose first steps need no controller overlaps them with the start). They stop
// when ctx ends or Stop is called. There is no leader election, no metrics and no health
// server: the runner lives for one command.
func Start(ctx context.Context, cfg *rest.Config, conn Connection, o Options, logger logr.Logger) (*Runner, error) {
	o.Scope = NewCacheScope(namespaceOr(o.Namespace))
	opts := ctrl.Options{
		Scheme: scheme.New(), Cache: cacheOptionsFor(o), Logger: logger,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ControllerConfig(), NewCache: NewCache,
	}
	opts.Cache.HTTPClient, opts.Client.HTTPClient = conn.HTTPClient, conn.HTTPClient
	if conn.Mapper != nil {
		opts.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return conn.Mapper, nil }
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the in-process controllers: %w", err)
	}
	if err := Setup(ctx, mgr, o); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(log.IntoContext(ctx, logger))
	r := &Runner{cancel: cancel, done: make(chan struct{}), synced: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = mgr.Start(ctx)
	}()
	go func() {
		defer close(r.synced)
		r.syncErr = waitSynced(ctx, mgr.GetCache(), WatchedTypes(o), r.done)
	}()
	return r, nil
}

// WaitSynced returns once the controllers' caches hold every object of the kinds they
// watch; when they cannot, it stops the controllers and says why.
func (r *Runner) WaitSynced(ctx context.Context) error {
	select {
	case <-r.synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.syncErr == nil {
		return nil
	}
	err := r.syncErr
	_ = r.Stop()
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		err = r.err
	}
	return fmt.Errorf("the in-process controllers could not sync their caches: %w", err)
}

// waitSynced returns once the informers of objs hold what the API server had, or with
// the reason they cannot: the manager stopped, or ctx ended. Informers registered before
// the cache starts start with it, so that they all fill at once; the wait is on the cache
// behind NewCache's, so that an informer no controller waits for (one whose watch is
// retried after a refusal) does not hold back the others.
func waitSynced(ctx context.Context, c cache.Cache, objs []client.Object, stopped <-chan struct{}) error {
	c = unwrapped(c)
	informers := make([]cache.Informer, len(objs))
	for i, obj := range objs {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		informers[i] = inf
	}
	return waitInformers(ctx, informers, stopped)
}

// waitInformers waits on the done channel of each informer until every one has synced;
// it returns early when stopped is closed (nil: never) or ctx ends. Nothing polls.
func waitInformers(ctx context.Context, informers []cache.Informer, stopped <-chan struct{}) error {
	for _, inf := range informers {
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-stopped:
			return errors.New("the manager stopped")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Stop stops the controllers and waits for them to end.
func (r *Runner) Stop() error {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
	if errors.Is(r.err, context.Canceled) {
		return nil
	}
	return r.err
}

// Running is the liqo-auth-manager that holds the Lease of a cluster.
type Running struct {
	// Holder is its identity in the Lease (host name and a suffix).
	Holder string
	// Version is the version it announces ("" for a manager older than the label).
	Version string
}

// RunningManager returns the liqo-auth-manager that holds a fresh Lease in namespace ns,
// nil when none does: a Lease that was released or not renewed within its duration means
// no manager runs. A Lease that cannot be read is an error (Forbidden, for credentials
// that may not read it).
func RunningManager(ctx context.Context, c client.Reader, ns string, now time.Time) (*Running, error) {
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ManagerName}, &lease); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	holder, fresh := LeaseHolder(&lease, now)
	if !fresh {
		return nil, nil
	}
	return &Running{Holder: holder, Version: lease.Labels[VersionLabel]}, nil
}

// VersionLabel on the manager's Lease announces the version of the manager holding it.
const VersionLabel = "app.kubernetes.io/version"

// VersionLabels are the labels a manager puts on its Lease: its version, made a valid
// label value.
func VersionLabels() map[string]string {
	return map[string]string{VersionLabel: LabelValue(version.Get().Version)}
}

// LabelValue makes a version a valid label value: other characters become _, at most 63.
func LabelValue(v string) string {
	v = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || unicode.IsLetter(r) && r < unicode.MaxASCII || unicode.IsDigit(r) {
			return r
		}
		return '_'
	}, v)
	return strings.Trim(v[:min(len(v), 63)], "-_.")
}

// LeaseHolder returns who holds lease and whether the holder still keeps it fresh at now.
// A released Lease has no holder.
func LeaseHolder(lease *coordinationv1.Lease, now time.Time) (holder string, fresh bool) {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return "", false
	}
	return *s.HolderIdentity, s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second).After(now)
}

// namespaceOr is the Liqo namespace ns, or the default one.
func namespaceOr(ns string) string {
	if ns == "" {
		return wire.DefaultLiqoNamespace
	}
	return ns
}
