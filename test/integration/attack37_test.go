package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// TestAttack37StrippedSecretKeepsNoBulk acts as a namespace editor who may create Secrets
// in its own namespace: a Secret labelled for a remote cluster is held by the manager's
// cache, stripped of its data. What stripping kept was still the attacker's to size: the
// Secret's type (any string, of no bounded length) and every liqo.io/ label (each short,
// but as many as the API server takes): half a MiB each here, held for every such Secret.
// The cache keeps of a stripped Secret only the labels the controllers read, and no type.
func TestAttack37StrippedSecretKeepsNoBulk(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "attack37-provider"), "cl-provider")[0]
	ctx, cached := startScopedProvider(t, p)

	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "editor-ns"}}))
	editor := principal(t, p, "namespace-editor", "editor-ns", rule("", "secrets", "create"))
	manyLabels := map[string]string{wire.RemoteClusterIDLabel: "cl-x", wire.NonceLabel: "true"}
	value := strings.Repeat("v", 63)
	for i := range 4000 {
		manyLabels[fmt.Sprintf("liqo.io/%060d", i)] = value
	}
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
	}{
		{"a long type", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "editor-ns", Name: "long-type",
			Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-x"}}, Type: corev1.SecretType("example.com/" + strings.Repeat("t", 512<<10))}},
		{"many labels of this project", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "editor-ns", Name: "many-labels", Labels: manyLabels}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, editor.Create(ctx, tc.secret), "the API server takes it")
			var s corev1.Secret
			eventually(t, 20*time.Second, "the cache holds the Secret", func(ctx context.Context) (bool, error) {
				return cached.Get(ctx, client.ObjectKeyFromObject(tc.secret), &s) == nil, nil
			})
			require.True(t, authmanager.Stripped(&s))
			size := len(s.Type)
			for k, v := range s.Labels {
				size += len(k) + len(v)
			}
			assert.Less(t, size, 4<<10, "a stripped Secret costs the manager a few hundred bytes, not what its writer chose")
			assert.Equal(t, tc.secret.Labels[wire.RemoteClusterIDLabel], s.Labels[wire.RemoteClusterIDLabel], "the labels the controllers read are kept")
			assert.Equal(t, tc.secret.Labels[wire.NonceLabel], s.Labels[wire.NonceLabel])
		})
	}
}
