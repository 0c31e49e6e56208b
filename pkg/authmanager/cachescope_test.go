package authmanager

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestStrippedNonceIsReadLive: the cache may hold a nonce stripped of its content because
// the cache scope learns of a new tenant record a moment after the controllers' placement
// check does. Read stripped, the nonce would look empty and be filled again, under the
// consumer's signature of the first one (SignatureInvalid under load). It is read live,
// whatever the scope knows; a Secret under another name is not.
func TestStrippedNonceIsReadLive(t *testing.T) {
	ns := "liqo-tenant-cl-a"
	stripped := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{wire.StrippedAnnotation: "true"}}}
	}
	full := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{wire.NonceField: []byte("n")}}
	}
	cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(stripped(wire.NonceSecretName), stripped("other")).Build()
	live := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(full(wire.NonceSecretName), full("other")).Build()
	c := liveWhenStripped{Client: cached, live: live}

	var s corev1.Secret
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: wire.NonceSecretName}, &s))
	assert.Equal(t, "n", string(s.Data[wire.NonceField]), "the nonce is read live")
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "other"}, &s))
	assert.Empty(t, s.Data, "a Secret no controller reads stays as cached")
}
