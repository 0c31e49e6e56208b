package identity

import (
	"crypto"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestSliceKubeconfigKeyFollowsTheCertificate: during a key rotation a slice's kubeconfig
// is built with the key of the set that holds its certificate's public key: the previous
// one (the Reconciler's Key, read at start) while the old certificate is there, the
// current one once the certificate of the new key arrived, the staged one for a
// certificate of it; a certificate for a key of no set is refused.
func TestSliceKubeconfigKeyFollowsTheCertificate(t *testing.T) {
	f := newFixture(t)
	current, next, stranger := must(authn.GenerateKey(authn.Ed25519)), must(authn.GenerateKey(authn.Ed25519)), must(authn.GenerateKey(authn.Ed25519))
	// f.key is the key the manager started with; the rotation switched away from it.
	keys := cluster.FixedKeys{Current: current, Next: next, Previous: f.key}
	for _, tc := range []struct {
		name   string
		cert   crypto.Signer
		want   crypto.Signer // nil: refused
		reason string
	}{
		{name: "certificate of the previous key", cert: f.key, want: f.key},
		{name: "certificate of the current key", cert: current, want: current},
		{name: "certificate of the staged key", cert: next, want: next},
		{name: "certificate of a key of no set", cert: stranger, reason: string(authn.ReasonCertificateKeyMismatch)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := f.identity()
			user := authn.SliceUserName("s1", testSelf)
			id.Name, id.Spec.Type, id.Labels[wire.SliceNameLabel] = wire.SliceIdentityName("s1"), authv1beta1.ResourceSliceIdentityType, "s1"
			id.Spec.AuthParams.SignedCRT = f.ca.leaf(tc.cert.Public(), user, 3, f.now.Add(time.Hour))
			w := f.newWorld("", id)
			w.r.Keys = keys
			_, got, _, _ := w.reconcile(keyOf(id))
			c := ready(t, got)
			if tc.want == nil {
				if c.Status != metav1.ConditionFalse || c.Reason != tc.reason || w.secret(got.Namespace, got.Name) != nil {
					t.Fatalf("Ready is %s %s (%s), want False %s and no kubeconfig", c.Status, c.Reason, c.Message, tc.reason)
				}
				return
			}
			if c.Status != metav1.ConditionTrue {
				t.Fatalf("Ready is %s %s (%s), want True", c.Status, c.Reason, c.Message)
			}
			info := must(authn.ReadKubeconfig(w.secret(got.Namespace, got.Name).Data[wire.KubeconfigField]))
			if held := must(authn.ParsePrivateKey(info.KeyPEM)); !authn.PublicKeysEqual(held.Public(), tc.want.Public()) {
				t.Fatal("the kubeconfig holds another key than the one of its certificate")
			}
		})
	}
}
