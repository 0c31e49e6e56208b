package authmanager

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// prestartedCache is a cache the in-process runner starts and syncs itself before the
// manager starts. The manager's Start of it only holds until the end, so the manager finds
// it synced at once and starts the controllers without a polling round.
type prestartedCache struct {
	cache.Cache
}

// Start holds until ctx ends: the real cache was started by startCache.
func (c *prestartedCache) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func newPrestartedCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &prestartedCache{Cache: c}, nil
}

// startCache starts the real cache behind c with informers for objs, and returns once
// every one has synced.
func startCache(ctx context.Context, c cache.Cache, objs []client.Object) error {
	pc, ok := c.(*prestartedCache)
	if !ok {
		return errors.New("the in-process manager has no prestarted cache")
	}
	var informers []cache.Informer
	for _, obj := range objs {
		inf, err := pc.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		informers = append(informers, inf)
	}
	errc := make(chan error, 1)
	go func() { errc <- pc.Cache.Start(ctx) }()
	// Each informer's done channel closes when it has synced: no polling round, unlike
	// client-go's WaitForCacheSync (100 ms).
	for _, inf := range informers {
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return errors.Join(errors.New("the cache stopped before it synced"), err)
		}
	}
	return nil
}
