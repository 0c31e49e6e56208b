package authmanager

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewCache is the manager's cache (ctrl.Options.NewCache): controller-runtime's informer
// cache whose WaitForCacheSync waits on the done channel of each informer asked of it so
// far, instead of asking client-go's WaitForCacheSync, which polls every 100 ms. A manager
// waits for its cache before it starts any controller, so with a polling wait the
// controllers liqoctl runs for one command started one or two polling periods after their
// informers had synced: most of an in-process handshake.
//
// Like controller-runtime's own wait, it covers the informers that exist when it is asked
// (each controller then waits for its own sources, wiring.Watch); an informer created
// later by a read of another kind blocks that read until it has synced, as the cache's
// readers do.
func NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &syncedCache{Cache: c, informers: map[cache.Informer]struct{}{}}, nil
}

type syncedCache struct {
	cache.Cache
	mu        sync.Mutex
	informers map[cache.Informer]struct{}
}

// GetInformer is the cache's, remembering the informer for WaitForCacheSync.
func (c *syncedCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	c.track(inf, err)
	return inf, err
}

// GetInformerForKind is the cache's, remembering the informer for WaitForCacheSync.
func (c *syncedCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	c.track(inf, err)
	return inf, err
}

func (c *syncedCache) track(inf cache.Informer, err error) {
	if err != nil || inf == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.informers[inf] = struct{}{}
}

// WaitForCacheSync returns true once every informer asked of the cache so far has synced,
// false when ctx ends first.
func (c *syncedCache) WaitForCacheSync(ctx context.Context) bool {
	c.mu.Lock()
	informers := make([]cache.Informer, 0, len(c.informers))
	for inf := range c.informers {
		informers = append(informers, inf)
	}
	c.mu.Unlock()
	return waitInformers(ctx, informers, nil) == nil
}

// unwrapped is the cache behind c when c is NewCache's: a wait on informers the manager
// itself does not need must not hold the manager's start back.
func unwrapped(c cache.Cache) cache.Cache {
	if s, ok := c.(*syncedCache); ok {
		return s.Cache
	}
	return c
}
