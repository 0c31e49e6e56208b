package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestTenantRecordRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := &TenantRecord{RemoteID: "cl-a", Namespace: "liqo-tenant-cl-a", NamespaceUID: "uid", CAFingerprint: "sha256:ff"}
	rec.AddCertificate(IssuedCertificate{Serial: "01", NotAfter: now.Add(time.Hour), KeyFingerprint: "sha256:k1"}, now)
	rec.AddCertificate(IssuedCertificate{Serial: "01", NotAfter: now.Add(time.Hour)}, now)
	rec.AddCertificate(IssuedCertificate{Serial: "02", NotAfter: now.Add(30 * time.Minute)}, now)
	require.Len(t, rec.Certificates, 2, "a serial is recorded once")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kept": "yes"}}}
	require.NoError(t, rec.writeTo(cm))
	assert.Equal(t, "yes", cm.Labels["kept"], "labels of others are kept")
	assert.Equal(t, "true", cm.Labels[wire.TenantRecordLabel])
	assert.Equal(t, "cl-a", cm.Labels[wire.RemoteClusterIDLabel])
	back, err := recordFromConfigMap("cl-a", cm)
	require.NoError(t, err)
	assert.Equal(t, rec.Namespace, back.Namespace)
	assert.Equal(t, rec.NamespaceUID, back.NamespaceUID)
	assert.Equal(t, rec.CAFingerprint, back.CAFingerprint)
	valid := back.Valid(now)
	require.Len(t, valid, 2)
	assert.Equal(t, "02", valid[0].Serial, "soonest expiry first")
	assert.Empty(t, back.Valid(now.Add(2*time.Hour)), "expired certificates are not valid")
	back.AddCertificate(IssuedCertificate{Serial: "03", NotAfter: now.Add(3 * time.Hour)}, now.Add(2*time.Hour))
	assert.Len(t, back.Certificates, 1, "expired certificates are forgotten when a new one is added")

	empty := &TenantRecord{RemoteID: "cl-b"}
	require.NoError(t, empty.writeTo(cm))
	assert.NotContains(t, cm.Data, recordCertsKey)
	assert.NotContains(t, cm.Data, recordCAKey)
	cm.Data[recordCertsKey] = "{not json"
	_, err = recordFromConfigMap("cl-b", cm)
	assert.ErrorContains(t, err, "certificates")
	var nilRec *TenantRecord
	assert.Empty(t, nilRec.Valid(now))
}

// TestTenantRecordStaysSmallWithManySlices: a tenant holding as many slices as a provider
// decides, each with a certificate and its renewal not expired yet, plus renewals of the
// control plane, keeps its record far under a ConfigMap's 1 MiB; a record that would not
// fit is refused, not written truncated.
func TestTenantRecordStaysSmallWithManySlices(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := &TenantRecord{RemoteID: "cl-a-consumer-with-a-long-cluster-id-0123456789abcd", Namespace: "liqo-tenant-cl-a", NamespaceUID: "0d6f3c58-0000-4000-8000-000000000000",
		CAFingerprint: "sha256:" + strings.Repeat("f", 64), PublishedCAFingerprint: "sha256:" + strings.Repeat("e", 64), PublishedAPIServer: "https://provider.example.com:6443",
		State: "Cordoned", ConsumedNonce: &ConsumedNonce{Digest: strings.Repeat("d", 64), TenantUID: "uid", KeyFingerprint: "sha256:k", CSRDigest: "c", At: now}}
	serial := 0
	add := func(slice string) {
		serial++
		rec.AddCertificate(IssuedCertificate{Serial: fmt.Sprintf("%032x", serial), NotAfter: now.Add(720 * time.Hour),
			KeyFingerprint: "sha256:" + strings.Repeat("a", 64), Slice: slice}, now)
	}
	for i := range 3 * 64 {
		add(fmt.Sprintf("slice-with-a-fairly-long-name-%03d", i%64))
	}
	for range 10 {
		add("")
	}
	cm := &corev1.ConfigMap{}
	require.NoError(t, rec.writeTo(cm))
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	assert.Less(t, size, 100<<10, "%d certificates in %d bytes", len(rec.Certificates), size)

	for i := 0; len(rec.Certificates) < 10000; i++ {
		add(fmt.Sprintf("s%d", i))
	}
	err := rec.writeTo(&corev1.ConfigMap{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than")
}

func TestNonceUsed(t *testing.T) {
	consumed := &TenantRecord{ConsumedNonce: &ConsumedNonce{Digest: NonceDigest("n1"), SecretUID: "uid-1"}}
	legacy := &TenantRecord{ConsumedNonce: &ConsumedNonce{Digest: NonceDigest("n1")}} // recorded before SecretUID
	for _, tc := range []struct {
		name       string
		rec        *TenantRecord
		value, uid string
		want       bool
	}{
		{"no record", nil, "n1", "uid-1", false},
		{"nothing consumed", &TenantRecord{}, "n1", "uid-1", false},
		{"the consumed nonce", consumed, "n1", "uid-1", true},
		{"the consumed nonce, in another Secret", consumed, "n1", "uid-2", true},
		{"another value written over it, in its Secret", consumed, "n2", "uid-1", true},
		{"a new nonce in a new Secret", consumed, "n2", "uid-2", false},
		{"a new nonce in a Secret without UID", consumed, "n2", "", false},
		{"legacy record: the consumed nonce", legacy, "n1", "uid-1", true},
		{"legacy record: another nonce", legacy, "n2", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rec.NonceUsed(tc.value, tc.uid); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPinnedProxy: a pinned proxy, "" (none) included, survives the ConfigMap and refuses
// any other. Nothing pinned refuses nothing to a handshake, which pins then
// (CheckPinnedProxy), and every proxy to an Identity (CheckIdentityProxy), whose advice
// names no command built from the proxy an Identity writer chose.
func TestPinnedProxy(t *testing.T) {
	const proxy = "socks5://proxy.example.com:1080"
	const quoted = "http://proxy.example.com:3128/'$(id)'"
	for _, tc := range []struct {
		name       string
		pinned     *string
		ok         map[string]bool
		identityOK map[string]bool
	}{
		{"nothing pinned", nil, map[string]bool{"": true, proxy: true}, map[string]bool{"": true, proxy: false, quoted: false}},
		{"no proxy pinned", ptr.To(""), map[string]bool{"": true, proxy: false}, map[string]bool{"": true, proxy: false}},
		{"a proxy pinned", ptr.To(proxy), map[string]bool{"": false, proxy: true, "http://proxy.attacker.example:3128": false},
			map[string]bool{"": false, proxy: true, "http://proxy.attacker.example:3128": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			require.NoError(t, (&TenantRecord{RemoteID: "cl-p", ProxyURL: tc.pinned}).writeTo(cm))
			back, err := recordFromConfigMap("cl-p", cm)
			require.NoError(t, err)
			assert.Equal(t, tc.pinned, back.ProxyURL)
			assert.Equal(t, ptr.Deref(tc.pinned, ""), back.PinnedProxy(), "nothing pinned is none")
			for got, ok := range tc.ok {
				err := back.CheckPinnedProxy("liqo", got)
				if ok {
					assert.NoError(t, err, got)
					continue
				}
				assert.ErrorIs(t, err, ErrProxyNotPinned, got)
				assert.ErrorContains(t, err, UnpinProxyCommand("liqo", "cl-p"))
			}
			for got, ok := range tc.identityOK {
				err := back.CheckIdentityProxy("liqo", "cl-p", got)
				if ok {
					assert.NoError(t, err, got)
					continue
				}
				assert.ErrorIs(t, err, ErrProxyNotPinned, got)
				if tc.pinned == nil {
					assert.ErrorContains(t, err, "--tenant-proxy-url")
					assert.NotContains(t, err.Error(), "kubectl", "a command built from the Identity's proxy")
				}
			}
		})
	}
	// No record at all: only no proxy.
	var none *TenantRecord
	assert.Empty(t, none.PinnedProxy())
	assert.NoError(t, none.CheckIdentityProxy("liqo", "cl-p", ""))
	assert.ErrorIs(t, none.CheckIdentityProxy("liqo", "cl-p", proxy), ErrProxyNotPinned)
}

// TestManagersGuessRefusalsNameTheWaysToReplaceIt: a tenant namespace and proxy the
// manager pinned as its guess (PinnedByManager) refuse others as any pin does, but their
// advice is the provider's word that replaces the guess (authenticate, or generate tenant
// --remote-tenant-namespace), never a hand unpin, and names no command built from the
// proxy asked for (an Identity writer may have chosen it).
func TestManagersGuessRefusalsNameTheWaysToReplaceIt(t *testing.T) {
	const attacker = "http://proxy.attacker.example:3128"
	guess := &TenantRecord{RemoteID: "cl-p", ProviderTenantNamespace: "liqo-tenant-cl-c", ProxyURL: ptr.To(""), PinnedByManager: true}
	assert.NoError(t, guess.CheckProviderNamespace("liqo-tenant-cl-c"), "the guess itself")
	for what, err := range map[string]error{
		"a handshake's proxy": guess.CheckPinnedProxy("liqo", attacker),
		"an Identity's proxy": guess.CheckIdentityProxy("liqo", "cl-p", attacker),
		"another namespace":   guess.CheckProviderNamespace("elsewhere"),
	} {
		require.Error(t, err, what)
		assert.ErrorContains(t, err, "guess", what)
		assert.ErrorContains(t, err, "liqoctl authenticate", what)
		assert.ErrorContains(t, err, "--remote-tenant-namespace", what)
		assert.NotContains(t, err.Error(), UnpinProxyCommand("liqo", "cl-p"), what)
		assert.NotContains(t, err.Error(), "--tenant-proxy-url "+attacker, what)
	}
}
