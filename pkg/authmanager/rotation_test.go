package authmanager

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

// TestRotationTriggerActsOnTheLiveRequest: the rotation trigger reads the keys Secret from
// the cache first, and acts only on what the live Secret asks. A cached copy behind the
// answer (key-rotated already written) stages no new key; a Secret of that name in another
// namespace, which a namespace creator may label so that the cache holds it, asks nothing.
func TestRotationTriggerActsOnTheLiveRequest(t *testing.T) {
	const ns = "liqo"
	asking := func(s *corev1.Secret) { s.Annotations = map[string]string{wire.RotateKeyAnnotation: "t1"} }
	answered := func(s *corev1.Secret) {
		s.Annotations = map[string]string{wire.RotateKeyAnnotation: "t1", wire.KeyRotatedAnnotation: "t1"}
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "editor-ns", Name: wire.KeysSecretName,
		Labels:      map[string]string{wire.RemoteClusterIDLabel: "cl-x"},
		Annotations: map[string]string{wire.RotateKeyAnnotation: "t9"}}}
	for _, tc := range []struct {
		name         string
		cached, live func(*corev1.Secret)
		extra        []client.Object
		// req is what woke the trigger (the keys Secret when empty).
		req  client.ObjectKey
		acts bool
	}{
		{"asked, cached and live", asking, asking, nil, client.ObjectKey{}, true},
		{"a cached copy behind the answer", asking, answered, nil, client.ObjectKey{}, false},
		{"answered, and a Secret of that name elsewhere asking", answered, answered, []client.Object{foreign}, client.ObjectKeyFromObject(foreign), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			live := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.extra...).Build()
			_, _, err := cluster.EnsureClusterKey(ctx, live, ns, authn.Ed25519)
			require.NoError(t, err)
			var s corev1.Secret
			require.NoError(t, live.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &s))
			cachedCopy := s.DeepCopy()
			cachedCopy.ResourceVersion = ""
			tc.cached(cachedCopy)
			tc.live(&s)
			require.NoError(t, live.Update(ctx, &s))
			cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append([]client.Object{cachedCopy}, tc.extra...)...).Build()

			r := &rotationReconciler{cached: cached, client: live, namespace: ns, role: Consumer,
				driver: &rotation.Driver{Client: live, Namespace: ns, ClusterID: "cl-self", NoIdentities: true}}
			req := tc.req
			if req.Name == "" {
				req = client.ObjectKeyFromObject(&s)
			}
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: req})
			require.NoError(t, err)
			var after corev1.Secret
			require.NoError(t, live.Get(ctx, client.ObjectKeyFromObject(&s), &after))
			assert.Equal(t, tc.acts, after.ResourceVersion != s.ResourceVersion, "the keys Secret is written (a key staged, the request answered)")
		})
	}
}

// TestRotationTriggerSeesALongToken: the keys Secret's rotate-key annotation is "any token"
// (wire.RotateKeyAnnotation), which its administrator may write by hand. The trigger reads
// it first from the cache, whose transform keeps annotations up to maxAnnotation bytes:
// a longer token must still be seen there, or the rotation asked for is never made (and
// the administrator waits for key-rotated forever).
func TestRotationTriggerSeesALongToken(t *testing.T) {
	const ns = "liqo"
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"short token", "t1"},
		{"token longer than the cache's annotation bound", strings.Repeat("x", maxAnnotation+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			live := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
			_, _, err := cluster.EnsureClusterKey(ctx, live, ns, authn.Ed25519)
			require.NoError(t, err)
			var s corev1.Secret
			require.NoError(t, live.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.KeysSecretName}, &s))
			s.Annotations = map[string]string{wire.RotateKeyAnnotation: tc.token}
			require.NoError(t, live.Update(ctx, &s))
			// The cache holds what the manager's transform makes of the live Secret.
			obj, err := NewCacheScope(ns).transform(s.DeepCopy())
			require.NoError(t, err)
			cachedCopy := obj.(*corev1.Secret)
			cachedCopy.ResourceVersion = ""
			cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cachedCopy).Build()

			r := &rotationReconciler{cached: cached, client: live, namespace: ns, role: Consumer,
				driver: &rotation.Driver{Client: live, Namespace: ns, ClusterID: "cl-self", NoIdentities: true}}
			_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
			require.NoError(t, err)
			var after corev1.Secret
			require.NoError(t, live.Get(ctx, client.ObjectKeyFromObject(&s), &after))
			assert.NotEqual(t, s.ResourceVersion, after.ResourceVersion, "the rotation asked moves on (a key staged)")
		})
	}
}
