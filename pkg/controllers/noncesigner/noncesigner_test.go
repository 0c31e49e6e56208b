package noncesigner

import (
	"bytes"
	"context"
	"crypto"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

const (
	liqoNS   = "liqo"
	provider = "cl-provider"
	tenantNS = "liqo-tenant-cl-provider"
	// otherNS is the recorded tenant namespace of another provider.
	other, otherNS = "cl-other", "liqo-tenant-cl-other"
)

// must is v, or a panic: the tests' crypto does not fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// clusterKey is this cluster's key.
var clusterKey = must(authn.GenerateKey(authn.Ed25519))

// signedNonceSecret is the provider's nonce, copied by the consumer's administrator into
// the Secret this cluster signs, in the provider's tenant namespace.
func signedNonceSecret(nonce string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.SignedNonceSecretName, Namespace: tenantNS, UID: "signed-nonce-uid",
		Labels: map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: provider}},
		Data: map[string][]byte{wire.NonceField: []byte(nonce)}}
}

// env is a Reconciler on a fake consumer holding the tenant namespaces of two providers
// and their records, and the Secret patches it made.
type env struct {
	c        client.WithWatch
	r        *Reconciler
	key      crypto.Signer
	recorder *events.FakeRecorder
	patches  int
}

func newEnv(t *testing.T, s *corev1.Secret) *env {
	t.Helper()
	e := &env{recorder: events.NewFakeRecorder(10), key: clusterKey}
	e.c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, UID: "ns-uid", Labels: cluster.TenantNamespaceLabels(provider)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS, UID: "ns-uid-2", Labels: cluster.TenantNamespaceLabels(other)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", UID: "ns-uid-3", Labels: cluster.TenantNamespaceLabels(provider)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: liqoNS}}).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			e.patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			t.Error("the Reconciler updates a Secret: it only patches")
			return nil
		},
	}).Build()
	for remote, ns := range map[string]string{provider: tenantNS, other: otherNS} {
		if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, remote, true, func(r *cluster.TenantRecord) error {
			r.Namespace, r.NamespaceUID = ns, map[string]types.UID{tenantNS: "ns-uid", otherNS: "ns-uid-2"}[ns]
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.r = &Reconciler{Client: e.c, Placement: placement.Placement{Cache: e.c, Live: e.c, LiqoNamespace: liqoNS}, Recorder: e.recorder, Keys: cluster.FixedKeys{Current: e.key}}
	return e
}

// reconcile runs one Reconcile of s and returns it as left, with the Events recorded.
func (e *env) reconcile(t *testing.T, s *corev1.Secret) (*corev1.Secret, []string) {
	t.Helper()
	e.patches = 0
	got := &corev1.Secret{}
	if _, _, err := controllertest.Reconcile(t, e.r, e.c, client.ObjectKeyFromObject(s), got); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return got, controllertest.Events(e.recorder)
}

// TestSignsCanonicalNonce: a canonical nonce in the recorded tenant namespace of the
// provider its Secret names is signed with this cluster's key, once; a signature that
// does not verify (the nonce was replaced) is replaced.
func TestSignsCanonicalNonce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// sig is the signature the Secret holds already.
		sig func(nonce string) []byte
	}{
		{"unsigned", func(string) []byte { return nil }},
		{"signed with another key", func(nonce string) []byte {
			return must(authn.SignNonce(must(authn.GenerateKey(authn.Ed25519)), nonce))
		}},
		{"signed, then the nonce replaced", func(string) []byte {
			return must(authn.SignNonce(clusterKey, must(authn.NewNonce())))
		}},
		{"a garbage signature", func(string) []byte { return []byte("garbage") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nonce := must(authn.NewNonce())
			s := signedNonceSecret(nonce)
			if sig := tc.sig(nonce); sig != nil {
				s.Data[wire.SignedNonceField] = sig
			}
			e := newEnv(t, s)
			got, evs := e.reconcile(t, s)
			if err := authn.VerifyNonceSignature(e.key.Public(), nonce, got.Data[wire.SignedNonceField]); err != nil {
				t.Fatalf("the signature does not verify: %v", err)
			}
			if string(got.Data[wire.NonceField]) != nonce || e.patches != 1 || len(evs) != 1 ||
				!strings.HasPrefix(evs[0], "Normal "+authv1beta1.ReasonNonceSigned+" ") {
				t.Errorf("nonce %q, %d patches, Events %v, want the nonce kept, one patch and one %s", got.Data[wire.NonceField], e.patches, evs,
					authv1beta1.ReasonNonceSigned)
			}
			sig := got.Data[wire.SignedNonceField]
			again, evs := e.reconcile(t, s)
			if !bytes.Equal(again.Data[wire.SignedNonceField], sig) || e.patches != 0 || len(evs) != 0 {
				t.Errorf("reconciled again: %d patches, Events %v, signature changed %t", e.patches, evs, !bytes.Equal(again.Data[wire.SignedNonceField], sig))
			}
		})
	}
}

// TestDoesNotSign: a nonce that is not canonical, or whose Secret is not in the recorded
// tenant namespace of the provider it names, is not signed: the signer is not an oracle.
func TestDoesNotSign(t *testing.T) {
	nonce := must(authn.NewNonce())
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Secret)
		// wantEvent is the start of the one Event wanted, none if empty.
		wantEvent string
	}{
		{name: "a message that is no nonce", mutate: func(s *corev1.Secret) {
			s.Data[wire.NonceField] = []byte("please sign this")
		}, wantEvent: "Warning " + string(authn.ReasonNonceNotCanonical)},
		{name: "a nonce with a trailing newline", mutate: func(s *corev1.Secret) {
			s.Data[wire.NonceField] = []byte(nonce + "\n")
		}, wantEvent: "Warning " + string(authn.ReasonNonceNotCanonical)},
		{name: "a nonce in URL-safe base64", mutate: func(s *corev1.Secret) {
			s.Data[wire.NonceField] = []byte(strings.Repeat("_", len(nonce)-1) + "=")
		}, wantEvent: "Warning " + string(authn.ReasonNonceNotCanonical)},
		{name: "a nonce whose last character has padding bits set", mutate: func(s *corev1.Secret) {
			// "AB==" decodes like "AA==" with its unused low bits set: not canonical.
			s.Data[wire.NonceField] = []byte(strings.Repeat("A", len(nonce)-3) + "B==")
		}, wantEvent: "Warning " + string(authn.ReasonNonceNotCanonical)},
		{name: "in the tenant namespace of another provider", mutate: func(s *corev1.Secret) {
			s.Namespace = otherNS
		}, wantEvent: "Warning SignedNonceOutsideTenantNamespace"},
		{name: "in a namespace labelled for the provider but not recorded", mutate: func(s *corev1.Secret) {
			s.Namespace = "elsewhere"
		}, wantEvent: "Warning SignedNonceOutsideTenantNamespace"},
		{name: "labelled for another provider", mutate: func(s *corev1.Secret) {
			s.Labels[wire.RemoteClusterIDLabel] = other
		}, wantEvent: "Warning SignedNonceOutsideTenantNamespace"},
		{name: "naming no provider", mutate: func(s *corev1.Secret) {
			delete(s.Labels, wire.RemoteClusterIDLabel)
		}, wantEvent: "Warning SignedNonceOutsideTenantNamespace"},
		{name: "named otherwise", mutate: func(s *corev1.Secret) {
			s.Name = "another-signed-nonce"
		}},
		{name: "empty", mutate: func(s *corev1.Secret) {
			s.Data = nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := signedNonceSecret(nonce)
			tc.mutate(s)
			e := newEnv(t, s)
			got, evs := e.reconcile(t, s)
			if sig := got.Data[wire.SignedNonceField]; len(sig) != 0 || e.patches != 0 {
				t.Errorf("signed (%d bytes, %d patches)", len(sig), e.patches)
			}
			var want []string
			if tc.wantEvent != "" {
				want = []string{tc.wantEvent}
			}
			if len(evs) != len(want) || (len(want) == 1 && !strings.HasPrefix(evs[0], want[0]+" ")) {
				t.Errorf("Events %v, want %v", evs, want)
			}
		})
	}
}
