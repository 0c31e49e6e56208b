package handshake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// TestOnlyProofsFailed: the slices' removal goes on past failed proofs only; any other
// error, alone or among them, stops it.
func TestOnlyProofsFailed(t *testing.T) {
	unproven := fmt.Errorf("(remote) %w: slice a", ErrRevocationUnproven)
	kept := fmt.Errorf("(remote) %w: slice b", ErrAccessNotRevoked)
	other := errors.New("(local) deleting the ResourceSlice: timed out")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"none", nil, false},
		{"one unproven", unproven, true},
		{"one kept", kept, true},
		{"both, joined", errors.Join(unproven, kept), true},
		{"another error", other, false},
		{"another error after failed proofs", errors.Join(unproven, other), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OnlyProofsFailed(tc.err); got != tc.want {
				t.Errorf("OnlyProofsFailed(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}

// TestTenantNamespaceLookupFailureIsSaid: the removals and the slices' listing fall back to
// the default tenant namespace only when none is recorded or the record may not be read
// (a peering user); a record that cannot be read for another reason is an error, never
// an empty listing in the default name.
func TestTenantNamespaceLookupFailureIsSaid(t *testing.T) {
	record := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok && key.Namespace == "liqo" && err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	cm := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name    string
		err     error
		want    string
		wantErr bool
	}{
		{"no record", nil, "liqo-tenant-cl-p", false},
		{"record forbidden", apierrors.NewForbidden(cm, "x", errors.New("no")), "liqo-tenant-cl-p", false},
		{"record unreadable", apierrors.NewServerTimeout(cm, "get", 1), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(record(tc.err)).Build()
			s := &Side{Scope: Local, Client: c, Namespace: "liqo", ClusterID: "cl-c", Report: &lines{}}
			got, err := tenantNamespaceOrDefault(context.Background(), s, "cl-p")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("tenantNamespaceOrDefault = %q, %v; want %q, error %t", got, err, tc.want, tc.wantErr)
			}
			_, err = SlicesFor(context.Background(), s, "cl-p")
			if (err != nil) != tc.wantErr {
				t.Fatalf("SlicesFor: %v; want error %t", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), "looking up the tenant namespace of cluster cl-p") {
				t.Errorf("SlicesFor's error does not say what failed: %v", err)
			}
		})
	}
}

// TestValidNow: a slice's proof is asked again only with certificates valid now: one that
// expired since answers 401, which a proof reads as "may do nothing".
func TestValidNow(t *testing.T) {
	p := newCredentialPKI(t)
	now := time.Now()
	valid := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: p.cert("slice-a-1", p.current, now.Add(time.Hour))}}
	expired := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: p.cert("slice-a-1", p.current, now.Add(-time.Minute))}}
	broken := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("not a certificate")}}
	got := validNow([]*rest.Config{expired, valid, broken}, now)
	if len(got) != 1 || got[0] != valid {
		t.Fatalf("validNow kept %d certificates; want the valid one only", len(got))
	}
}

// TestHeldSliceIdentityDeleted: a slice held by others' finalizers, whose consumer
// finalizer a slice writer stripped, leaves no credential behind: its Identity goes, only
// when the slice controls it (helper-39's F4).
func TestHeldSliceIdentityDeleted(t *testing.T) {
	now := metav1.Now()
	held := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-cl-p", Name: "s1", UID: "slice-uid",
		DeletionTimestamp: &now, Finalizers: []string{"example.com/hold"}}}
	identity := func(owner types.UID) *authv1beta1.Identity {
		id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: held.Namespace, Name: wire.SliceIdentityName(held.Name), UID: "id-uid"}}
		if owner != "" {
			isController := true
			id.OwnerReferences = []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "ResourceSlice", Name: held.Name, UID: owner, Controller: &isController}}
		}
		return id
	}
	for _, tc := range []struct {
		name     string
		objs     []client.Object
		wantGone bool
	}{
		{"controlled by the slice", []client.Object{identity("slice-uid")}, true},
		{"controlled by another slice of that name", []client.Object{identity("other-uid")}, false},
		{"not controlled", []client.Object{identity("")}, false},
		{"none", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objs...).Build()
			s := &Side{Scope: Local, Client: c, Namespace: "liqo", ClusterID: "cl-c", Report: &lines{}}
			left, err := deleteHeldSliceIdentity(context.Background(), s, held)
			if err != nil {
				t.Fatal(err)
			}
			if left == tc.wantGone {
				t.Errorf("left = %t, want %t", left, !tc.wantGone)
			}
			err = c.Get(context.Background(), SliceIdentity(held.Namespace, held.Name), &authv1beta1.Identity{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("Identity gone: %t (%v), want %t", gone, err, tc.wantGone)
			}
		})
	}
}
