package authmanager

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestStrippedNonceIsReadLiveOnce: a nonce the cache holds stripped is read live once per
// version the cache holds, not at every reconcile; only while its namespace is recorded,
// and only what the scope keeps whole.
func TestStrippedNonceIsReadLiveOnce(t *testing.T) {
	ns := "liqo-tenant-cl-a"
	key := client.ObjectKey{Namespace: ns, Name: wire.NonceSecretName}
	cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName,
		Annotations: map[string]string{wire.StrippedAnnotation: "true"}}}).Build()
	reads := 0
	live := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName},
		Data: map[string][]byte{wire.NonceField: []byte("n")}}).Build(), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
		reads++
		return c.Get(ctx, k, o, opts...)
	}})
	scope := NewCacheScope("liqo")
	c := liveWhenStripped{Client: cached, live: live, scope: scope}
	get := func() string {
		t.Helper()
		var s corev1.Secret
		require.NoError(t, c.Get(context.Background(), key, &s))
		return string(s.Data[wire.NonceField])
	}

	assert.Equal(t, "n", get())
	assert.Equal(t, "n", get())
	assert.Equal(t, 2, reads, "its namespace not recorded yet: read live each time")

	scope.setRecord(wire.TenantRecordName("cl-a"), ns)
	assert.Equal(t, "n", get())
	assert.Equal(t, "n", get())
	assert.Equal(t, "n", get())
	assert.Equal(t, 3, reads, "recorded: read live once for the version the cache holds")

	// The Secret changes, and the cache follows: read live again, once.
	for _, cl := range []client.Client{cached, live} {
		var s corev1.Secret
		require.NoError(t, cl.Get(context.Background(), key, &s))
		s.Labels = map[string]string{"x": "y"}
		require.NoError(t, cl.Update(context.Background(), &s))
	}
	reads--
	assert.Equal(t, "n", get())
	assert.Equal(t, 4, reads)
	assert.Equal(t, "n", get())
	assert.Equal(t, 4, reads)

	// The record goes: what was kept of its namespace goes with it.
	scope.setRecord(wire.TenantRecordName("cl-a"), "")
	assert.Empty(t, scope.whole)
	assert.Equal(t, "n", get())
	assert.Equal(t, 5, reads)

	// A kubeconfig-* no Identity the cache saw controls: the scope keeps it stripped, and so
	// does the copy: read live each time.
	scope.setRecord(wire.TenantRecordName("cl-a"), ns)
	other := client.ObjectKey{Namespace: ns, Name: wire.KubeconfigSecretName("made-up")}
	require.NoError(t, cached.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: other.Name,
		Annotations: map[string]string{wire.StrippedAnnotation: "true"}}}))
	require.NoError(t, live.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: other.Name}, Data: map[string][]byte{"k": []byte("v")}}))
	for range 2 {
		var s corev1.Secret
		require.NoError(t, c.Get(context.Background(), other, &s))
		assert.Equal(t, "v", string(s.Data["k"]))
	}
	assert.Equal(t, 7, reads)
	assert.NotContains(t, scope.whole, other)
}

// TestWholeCopiesGoWithTheirVersion: a copy read live goes when the cache moves to another
// version of the Secret or sees it deleted (a Secret writer making and deleting kept
// Secrets must not grow the manager's memory), stays across updates of its namespace's
// record that keep the namespace, and the first read of a version returns what later
// reads return (the copy, as the cache would keep it).
func TestWholeCopiesGoWithTheirVersion(t *testing.T) {
	ns := "liqo-tenant-cl-a"
	key := client.ObjectKey{Namespace: ns, Name: wire.NonceSecretName}
	scope := NewCacheScope("liqo")
	scope.setRecord(wire.TenantRecordName("cl-a"), ns)
	secret := func(rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName, ResourceVersion: rv,
			Annotations: map[string]string{"liqo.io/long": strings.Repeat("x", 2*maxAnnotation), "other.io/a": "b"}}, Data: map[string][]byte{wire.NonceField: []byte("n")}}
	}
	kept := scope.keepWholeCopy(secret("7"))
	require.NotNil(t, kept)
	assert.Empty(t, kept.Annotations, "kept as the cache keeps it")

	scope.forgetWholeCopy(secret("7"), false)
	assert.Contains(t, scope.whole, key, "the same version stays")
	scope.setRecord(wire.TenantRecordName("cl-a"), ns)
	assert.Contains(t, scope.whole, key, "an update of the record that keeps the namespace keeps the copies")
	scope.forgetWholeCopy(secret("8"), false)
	assert.NotContains(t, scope.whole, key, "another version: gone")

	require.NotNil(t, scope.keepWholeCopy(secret("8")))
	scope.forgetWholeCopy(toolscache.DeletedFinalStateUnknown{Key: ns + "/" + wire.NonceSecretName, Obj: secret("8")}, true)
	assert.Empty(t, scope.whole, "deleted: gone")

	// Deleted while its copy was being kept (the Delete event came first): the Secret made
	// again under the name takes the copy away as the cache adds it.
	scope.forgetWholeCopy(secret("9"), true)
	require.NotNil(t, scope.keepWholeCopy(secret("9")))
	scope.forgetWholeCopy(secret("10"), false)
	assert.Empty(t, scope.whole, "made again: gone")
	// The same resourceVersion under another UID is another Secret (an etcd restored).
	require.NotNil(t, scope.keepWholeCopy(secret("11")))
	other := secret("11")
	other.UID = "another"
	scope.forgetWholeCopy(other, false)
	assert.Empty(t, scope.whole, "another UID: gone")

	// Through the client: the first read and the next agree.
	cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.NonceSecretName,
		Annotations: map[string]string{wire.StrippedAnnotation: "true"}}}).Build()
	live := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret("")).Build()
	c := liveWhenStripped{Client: cached, live: live, scope: scope}
	var a, b corev1.Secret
	require.NoError(t, c.Get(context.Background(), key, &a))
	require.NoError(t, c.Get(context.Background(), key, &b))
	assert.Equal(t, a, b)
	assert.Empty(t, a.Annotations)
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
