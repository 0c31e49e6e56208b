package handshake

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestEnsureSignedNonceRacesTheSigner: the consumer's controllers may write the
// signed-nonce Secret between liqoctl's read and its write (re-signing the nonce it held
// after a key rotation), another handshake may create it, and a Secret writer may delete
// it between liqoctl's create and its read: liqoctl tries again and places its nonce,
// instead of failing the handshake with a conflict. A writer that keeps conflicting still
// fails, named. Where there is no Secret yet (the usual handshake), it is created unread.
func TestEnsureSignedNonceRacesTheSigner(t *testing.T) {
	const tn, provider = "liqo-tenant-cl-p", "cl-p"
	key := client.ObjectKey{Namespace: tn, Name: wire.SignedNonceSecretName}
	old, err := authn.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	nonce, err := authn.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	held := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.SignedNonceSecretName,
			Labels: map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: provider}},
			Data: map[string][]byte{wire.NonceField: []byte(old), wire.SignedNonceField: []byte("signed with the old key")}}
	}
	for _, tc := range []struct {
		name    string
		initial []client.Object
		// races is how many of liqoctl's writes another writer beats.
		races int
		// deletes is how many times the Secret is deleted between liqoctl's create and its
		// read.
		deletes int
		// wantErr says which error is expected (nil: none).
		wantErr func(error) bool
		// wantGets is how many reads liqoctl makes: none when there is no Secret yet.
		wantGets int
		// quotaFull refuses every create as a full Secret quota does, before the name is
		// looked at (TestAttack54FullSecretQuotaKeepsTheSignedNonce).
		quotaFull bool
		// getRefused refuses every read of the Secret (credentials that may create it only).
		getRefused bool
	}{
		{"the signer re-signs the held nonce first", []client.Object{held()}, 1, 0, nil, 2, false, false},
		{"another handshake creates the Secret first", nil, 1, 0, nil, 1, false, false},
		{"no race", []client.Object{held()}, 0, 0, nil, 1, false, false},
		{"no Secret yet", nil, 0, 0, nil, 0, false, false},
		{"the Secret is deleted between the create and the read", []client.Object{held()}, 0, 1, nil, 1, false, false},
		{"a writer that always wins", []client.Object{held()}, 100, 0, apierrors.IsConflict, 5, false, false},
		{"a full quota, the Secret there: reset in place", []client.Object{held()}, 0, 0, nil, 1, true, false},
		{"a full quota, no Secret: the quota's refusal", nil, 0, 0, apierrors.IsForbidden, 1, true, false},
		{"a full quota, the read refused too: the quota's refusal, not the read's", []client.Object{held()}, 0, 0, func(err error) bool {
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
		}, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			left, deletes, gets := tc.races, tc.deletes, 0
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.initial...).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if tc.quotaFull {
						return apierrors.NewForbidden(corev1.Resource("secrets"), obj.GetName(), errors.New("exceeded quota: secrets"))
					}
					if s, ok := obj.(*corev1.Secret); ok && left > 0 && s.Name == wire.SignedNonceSecretName &&
						apierrors.IsNotFound(cl.Get(ctx, key, &corev1.Secret{})) {
						left--
						// The other writer's Secret lands first.
						if err := cl.Create(ctx, held(), opts...); err != nil {
							return err
						}
					}
					return cl.Create(ctx, obj, opts...)
				},
				Get: func(ctx context.Context, cl client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if k == key {
						gets++
						if tc.getRefused {
							return apierrors.NewForbidden(corev1.Resource("secrets"), k.Name, errors.New("may not get secrets"))
						}
						if deletes > 0 {
							deletes--
							if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: k.Name}}); err != nil {
								return err
							}
						}
					}
					return cl.Get(ctx, k, obj, opts...)
				},
				Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if s, ok := obj.(*corev1.Secret); ok && left > 0 && s.Name == wire.SignedNonceSecretName {
						left--
						var live corev1.Secret
						if err := cl.Get(ctx, key, &live); err != nil {
							return err
						}
						live.Data[wire.SignedNonceField] = []byte("signed again by the controllers")
						if err := cl.Update(ctx, &live); err != nil {
							return err
						}
					}
					return cl.Update(ctx, obj, opts...)
				},
			}).Build()
			side := &Side{Scope: Local, Client: c, Namespace: "liqo", Report: &lines{}}
			err := EnsureSignedNonce(ctx, side, tn, provider, nonce, nil)
			read := gets
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("got %v, not the error expected", err)
				}
				if want := "(local) writing the nonce to sign"; !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureSignedNonce: %v", err)
			}
			var s corev1.Secret
			if err := c.Get(ctx, key, &s); err != nil {
				t.Fatal(err)
			}
			if got := string(s.Data[wire.NonceField]); got != nonce {
				t.Fatalf("the Secret holds nonce %q, want %q", got, nonce)
			}
			if _, stale := s.Data[wire.SignedNonceField]; stale {
				t.Fatalf("the stale signature was kept: %q", s.Data[wire.SignedNonceField])
			}
			if left != 0 || deletes != 0 {
				t.Fatalf("%d races and %d deletions were not run", left, deletes)
			}
			if read != tc.wantGets {
				t.Fatalf("%d reads of the Secret, want %d", read, tc.wantGets)
			}
		})
	}
}
