package authmanager

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewCache is the manager's cache (ctrl.Options.NewCache) for controllers watching kinds:
// controller-runtime's informer cache whose WaitForCacheSync waits on the done channel of
// each of those kinds' informers instead of asking client-go's WaitForCacheSync, which
// polls every 100 ms. A manager waits for its cache before it starts any controller, so
// with a polling wait the controllers liqoctl runs for one command started one or two
// polling periods after their informers had synced, most of an in-process handshake.
//
// The informers of kinds are registered by the wait itself (before the cache starts, they
// start with it); an informer created later by a read of another kind blocks that read
// until it has synced, as the cache's own readers do.
func NewCache(kinds []client.Object) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		return &syncedCache{Cache: c, kinds: kinds}, nil
	}
}

type syncedCache struct {
	cache.Cache
	kinds []client.Object
}

// WaitForCacheSync returns true once every watched kind's informer has synced, false when
// ctx ends first or an informer cannot be had.
func (c *syncedCache) WaitForCacheSync(ctx context.Context) bool {
	return WaitInformersSynced(ctx, c.Cache, c.kinds, nil) == nil
}
