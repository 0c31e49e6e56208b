package tenant

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestNonceToTenant: a nonce Secret wakes the one Tenant that may use it, never the rest
// of its namespace.
func TestNonceToTenant(t *testing.T) {
	const ns = "liqo-tenant-cl-c"
	secret := func(name string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	nonce := map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-c"}
	cases := []struct {
		name string
		obj  *corev1.Secret
		want []reconcile.Request
	}{
		{"the nonce", secret(wire.NonceSecretName, nonce), []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "cl-c"}}}},
		{"the nonce of another cluster", secret(wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-x"}),
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: "cl-x"}}}},
		{"another name, labelled as a nonce", secret("garbage-1", nonce), nil},
		{"no cluster label", secret(wire.NonceSecretName, map[string]string{wire.NonceLabel: "true"}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nonceToTenant(context.Background(), tc.obj))
		})
	}
}
