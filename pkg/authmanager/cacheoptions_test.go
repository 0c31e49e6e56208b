package authmanager

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// secretMatch says whether the cache of co would hold a Secret of namespace ns with lbls.
func secretMatch(t *testing.T, co cache.Options, ns string, lbls map[string]string) bool {
	t.Helper()
	var by *cache.ByObject
	for obj, b := range co.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			by = &b
		}
	}
	require.NotNil(t, by, "the cache scopes Secrets")
	sel := by.Label
	if by.Namespaces != nil {
		c, ok := by.Namespaces[ns]
		if !ok {
			c, ok = by.Namespaces[cache.AllNamespaces]
		}
		if !ok {
			return false
		}
		if c.LabelSelector != nil {
			sel = c.LabelSelector
		}
	}
	if sel == nil {
		sel = labels.Everything()
	}
	return sel.Matches(labels.Set(lbls))
}

// TestCacheOptionsSecrets: the manager's cache holds Secrets labelled for a remote cluster
// anywhere and every Secret of the Liqo namespace (the keys, a Peering's bootstrap Secret,
// whatever their labels), never an unlabelled Secret elsewhere (anyone who may create
// Secrets in a namespace would fill the manager's memory); one command's controllers, which
// carry their keys, hold no unlabelled Secret at all. The merge of two branches' rules once
// kept only the keys Secret of the Liqo namespace (a bootstrap Secret's change woke no
// Peering) and every unlabelled Secret elsewhere.
func TestCacheOptionsSecrets(t *testing.T) {
	labelled := map[string]string{wire.RemoteClusterIDLabel: "cl-a"}
	for _, tc := range []struct {
		name string
		co   cache.Options
		// liqoUnlabelled: an unlabelled Secret of the Liqo namespace is held.
		liqoUnlabelled bool
	}{
		{"manager", CacheOptions("liqo", nil, true), true},
		{"manager without the Peering CRD", CacheOptions("liqo", nil, false), true},
		{"one command's controllers", cacheOptionsFor(Options{Namespace: "liqo", Keys: cluster.FixedKeys{}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, secretMatch(t, tc.co, "liqo-tenant-cl-a", labelled), "a labelled Secret of a tenant namespace")
			assert.True(t, secretMatch(t, tc.co, "liqo", labelled), "a labelled Secret of the Liqo namespace")
			assert.False(t, secretMatch(t, tc.co, "default", nil), "an unlabelled Secret elsewhere")
			assert.False(t, secretMatch(t, tc.co, "liqo-tenant-cl-a", map[string]string{"app": "x"}), "an unlabelled Secret of a tenant namespace")
			assert.Equal(t, tc.liqoUnlabelled, secretMatch(t, tc.co, "liqo", map[string]string{}), "an unlabelled Secret of the Liqo namespace (the keys, a bootstrap Secret)")
		})
	}
}
