package authmanager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestSyncedCacheWaitsForItsInformers checks NewCache's wait before the cache starts: with
// no informer asked of it there is nothing to wait for; once one is, it returns false, not
// true, when its context ends before that informer syncs, and an informer asked of the
// cache behind it (the runner's own wait) is not waited for.
func TestSyncedCacheWaitsForItsInformers(t *testing.T) {
	c, err := NewCache(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: scheme.New(), Mapper: staticMapper(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unwrapped(c).GetInformer(context.Background(), &corev1.Secret{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync waited for an informer asked of the cache behind it")
	}
	if _, err := c.GetInformer(context.Background(), &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	if c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync said synced for a cache that never started")
	}
}

// staticMapper maps the core kinds the test watches, without discovery.
func staticMapper(t *testing.T) meta.RESTMapper {
	t.Helper()
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	for _, kind := range []string{"ConfigMap", "Secret"} {
		m.Add(corev1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	return m
}
