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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestSyncedCacheWaitsForItsKinds checks the wait of NewCache's cache before it starts:
// it registers an informer for each watched kind (so that they start together with the
// cache) and returns false, not true, when its context ends before they sync.
func TestSyncedCacheWaitsForItsKinds(t *testing.T) {
	kinds := []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}
	c, err := NewCache(kinds)(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: scheme.New(), Mapper: staticMapper(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync said synced for a cache that never started")
	}
	for _, obj := range kinds {
		inf, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		if inf.HasSynced() {
			t.Fatalf("the informer of %T says synced before the cache started", obj)
		}
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
