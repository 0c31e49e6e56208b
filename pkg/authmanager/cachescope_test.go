package authmanager

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
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

// TestCacheScopeTrustsNoMarkFromTheServer acts as a Secret writer of a recorded tenant
// namespace: a stripped mark written on the real nonce does not hide its content from the
// cache (the metrics read the cache), and kubeconfig-* Secrets are kept whole only when the
// Identity they are named after controls them.
func TestCacheScopeTrustsNoMarkFromTheServer(t *testing.T) {
	ns := "liqo-tenant-cl-a"
	s := NewCacheScope("liqo")
	s.setRecord(wire.TenantRecordName("cl-a"), ns)
	owned := func(kind, apiVersion, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: name, UID: "u", Controller: ptr.To(true)}}
	}
	identity := authv1beta1.GroupVersion.String()
	_, err := s.transform(&authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controlplane-cl-a", UID: "u"}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		whole  bool
	}{
		{"a nonce with a forged stripped mark", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName,
			Annotations: map[string]string{wire.StrippedAnnotation: "true"}}}, true},
		{"the Identity's kubeconfig", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-controlplane-cl-a",
			OwnerReferences: owned("Identity", identity, "controlplane-cl-a")}}, true},
		{"a kubeconfig-* controlled by a made-up Identity of its name", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-made-up",
			OwnerReferences: owned("Identity", identity, "made-up")}}, false},
		{"a kubeconfig-* nobody owns", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-big-1"}}, false},
		{"a kubeconfig-* owned by another Identity", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-big-2",
			OwnerReferences: owned("Identity", identity, "controlplane-cl-a")}}, false},
		{"a kubeconfig-* owned by another kind", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubeconfig-x",
			OwnerReferences: owned("ConfigMap", "v1", "x")}}, false},
		{"a nonce outside a recorded namespace", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: wire.NonceSecretName}}, false},
	} {
		tc.secret.Data = map[string][]byte{"k": []byte("v")}
		got, err := s.transform(tc.secret)
		require.NoError(t, err)
		sec := got.(*corev1.Secret)
		assert.Equal(t, tc.whole, sec.Data != nil, tc.name)
		assert.Equal(t, !tc.whole, Stripped(sec), tc.name)
	}
}
