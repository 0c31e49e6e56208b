package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

func TestUnusedNonce(t *testing.T) {
	ns := wire.TenantNamespaceName("cl-a")
	records := &peers{records: map[string]*cluster.TenantRecord{
		"cl-a":    {RemoteID: "cl-a", Namespace: ns},
		"cl-used": {RemoteID: "cl-used", Namespace: wire.TenantNamespaceName("cl-used"), ConsumedNonce: &cluster.ConsumedNonce{Digest: cluster.NonceDigest("n"), SecretUID: "uid-used"}},
		"cl-gone": {RemoteID: "cl-gone", Namespace: wire.TenantNamespaceName("cl-gone")},
	}, namespaces: cluster.TenantNamespaces{ns: "cl-a", wire.TenantNamespaceName("cl-used"): "cl-used"}}
	nonce := func(ns, name, peer, value string, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations,
			Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: peer}}, Data: map[string][]byte{wire.NonceField: []byte(value)}}
	}
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		want   bool
	}{
		{"an unused nonce", nonce(ns, wire.NonceSecretName, "cl-a", "n", nil), true},
		{"marked consumed by a Secret writer", nonce(ns, wire.NonceSecretName, "cl-a", "n", map[string]string{wire.NonceConsumedAtAnnotation: "2026-01-01T00:00:00Z"}), true},
		{"consumed, as the record says", nonce(wire.TenantNamespaceName("cl-used"), wire.NonceSecretName, "cl-used", "n", nil), false},
		{"a value written over the consumed nonce, in its Secret", withUID(nonce(wire.TenantNamespaceName("cl-used"), wire.NonceSecretName, "cl-used", "m", nil), "uid-used"), false},
		{"a new nonce, in a new Secret", withUID(nonce(wire.TenantNamespaceName("cl-used"), wire.NonceSecretName, "cl-used", "m", nil), "uid-new"), true},
		{"recorded, in a namespace no longer the one designated (re-created under its name)", nonce(wire.TenantNamespaceName("cl-gone"), wire.NonceSecretName, "cl-gone", "n", nil), false},
		{"another name", nonce(ns, "liqo-nonce-2", "cl-a", "n", nil), false},
		{"not yet filled", nonce(ns, wire.NonceSecretName, "cl-a", "", nil), false},
		{"a peer with no record", nonce(wire.TenantNamespaceName("cl-b"), wire.NonceSecretName, "cl-b", "n", nil), false},
		{"labelled for a peer, elsewhere", nonce("default", wire.NonceSecretName, "cl-a", "n", nil), false},
		{"in a namespace named for another peer", nonce(ns, wire.NonceSecretName, "cl-used", "x", nil), false},
	} {
		if _, got := unusedNonce(tc.secret, records); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func withUID(s *corev1.Secret, uid string) *corev1.Secret {
	s.UID = types.UID(uid)
	return s
}

func TestLastIssued(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 11, 23, h, 0, 0, 0, time.UTC) }
	rec := &cluster.TenantRecord{Certificates: []cluster.IssuedCertificate{
		{Serial: "1", NotAfter: at(1)}, {Serial: "2", NotAfter: at(3)}, {Serial: "3", NotAfter: at(2), Slice: "s"},
	}}
	if got, ok := lastIssued(rec, ""); !ok || !got.Equal(at(3)) {
		t.Errorf("control plane: %v %v", got, ok)
	}
	if got, ok := lastIssued(rec, "s"); !ok || !got.Equal(at(2)) {
		t.Errorf("slice: %v %v", got, ok)
	}
	if _, ok := lastIssued(rec, "other"); ok {
		t.Error("a slice with no certificate has no expiry")
	}
	if _, ok := lastIssued(nil, ""); ok {
		t.Error("no record, no expiry")
	}
}

// TestStrippedNonceIsReportedWhole: a nonce that reached the manager's cache a moment
// before the record of its namespace is kept there stripped of its content until it
// changes, which an unused nonce never does. Read from the cache alone, its age was never
// reported (seen in CI: TestAttack6NamespaceCreatorRevivesSeriesOfADeletedTenantNamespace
// waited for the administrator's nonce in vain). The collector reads it whole through the
// manager's client, by name, and only the nonce of a designated namespace.
func TestStrippedNonceIsReportedWhole(t *testing.T) {
	ctx := context.Background()
	const liqoNS, peer = "liqo", "cl-a"
	ns := wire.TenantNamespaceName(peer)
	tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "ns-uid",
		Labels: map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: peer}}}
	nonce := func(ns, name string, stripped bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: peer}}}
		if stripped {
			s.Annotations = map[string]string{wire.StrippedAnnotation: "true"}
		} else {
			s.Data = map[string][]byte{wire.NonceField: []byte("n")}
		}
		return s
	}
	cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tenantNS,
		nonce(ns, wire.NonceSecretName, true), nonce("default", wire.NonceSecretName, true), nonce(ns, "other", true)).Build()
	require.NoError(t, cluster.UpdateTenantRecord(ctx, cached, cached, liqoNS, peer, true, func(r *cluster.TenantRecord) error {
		r.Namespace, r.NamespaceUID = ns, "ns-uid"
		return nil
	}))
	whole := map[client.ObjectKey]*corev1.Secret{}
	for _, s := range []*corev1.Secret{nonce(ns, wire.NonceSecretName, false), nonce("default", wire.NonceSecretName, false), nonce(ns, "other", false)} {
		whole[client.ObjectKeyFromObject(s)] = s
	}
	var read []client.ObjectKey
	reader := interceptor.NewClient(cached, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
		if s, ok := o.(*corev1.Secret); ok && whole[k] != nil {
			read = append(read, k)
			whole[k].DeepCopyInto(s)
			return nil
		}
		return c.Get(ctx, k, o, opts...)
	}})

	reg := prometheus.NewRegistry()
	require.NoError(t, New().Register(reg, reader, liqoNS, "cl-provider", true, false, time.Now))
	families, err := reg.Gather()
	require.NoError(t, err)
	var peers []string
	for _, f := range families {
		if f.GetName() != NonceAgeName {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				peers = append(peers, l.GetValue())
			}
		}
	}
	assert.Equal(t, []string{peer}, peers, "the stripped nonce of the designated namespace is reported")
	assert.Equal(t, []client.ObjectKey{{Namespace: ns, Name: wire.NonceSecretName}}, read, "only that nonce is read again")
}
