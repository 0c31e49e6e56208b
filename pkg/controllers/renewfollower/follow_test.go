package renewfollower

import (
	"bytes"
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/controllertest"
)

// providerNS is the consumer's tenant namespace on the provider.
const providerNS = "liqo-tenant-" + testID

// remote is the provider as the identity reads it: a fake client whose watches are fed by
// the test (fw), and whose Tenants the identity may not read when forbidden.
func remote(t *testing.T, fw *watch.FakeWatcher, forbidden bool, objs ...client.Object) client.WithWatch {
	t.Helper()
	byName := func(o client.Object) []string { return []string{o.GetName()} }
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&authv1beta1.Tenant{}, "metadata.name", byName).WithIndex(&authv1beta1.Renew{}, "metadata.name", byName).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*authv1beta1.TenantList); ok && forbidden {
					return apierrors.NewForbidden(schema.GroupResource{Group: authv1beta1.Group, Resource: "tenants"}, "", nil)
				}
				return c.List(ctx, list, opts...)
			},
			Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
				return fw, nil
			},
		}).Build()
}

// providerTenant is this consumer's Tenant on the provider, publishing crt.
func providerTenant(crt []byte) *authv1beta1.Tenant {
	return &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: providerNS, Name: testID},
		Status: authv1beta1.TenantStatus{AuthParams: &authv1beta1.AuthParams{SignedCRT: crt}}}
}

// TestFollowTenant: the certificate the Tenant publishes when listed is picked up, then
// each newer one the watch brings; one for another key is refused with an Event and the
// Identity keeps the last good one; a Tenant of another name in the namespace is not
// listed. The watch closing ends the following, established.
func TestFollowTenant(t *testing.T) {
	e := setup(t)
	listed := e.pinned.leaf(e.key.Public(), testID, 20, 20*time.Hour)
	watched := e.pinned.leaf(e.key.Public(), testID, 21, 30*time.Hour)
	stranger := providerTenant(e.pinned.leaf(e.key.Public(), testID, 22, 40*time.Hour))
	stranger.Name = "cl-stranger"
	fw := watch.NewFake()
	rc := remote(t, fw, false, providerTenant(listed), stranger)
	done := make(chan struct{})
	var established bool
	var err error
	go func() {
		defer close(done)
		established, err = e.r.follow(context.Background(), rc, e.key2(), &authv1beta1.TenantList{},
			[]client.ListOption{client.InNamespace(providerNS), client.MatchingFields{"metadata.name": testID}})
	}()
	fw.Modify(providerTenant(watched))
	other := must(authn.GenerateKey(authn.Ed25519))
	fw.Modify(providerTenant(e.pinned.leaf(other.Public(), testID, 23, 50*time.Hour)))
	fw.Stop()
	<-done
	if !established || err == nil {
		t.Errorf("established %v, error %v", established, err)
	}
	id, _ := e.read(t)
	if !bytes.Equal(id.Spec.AuthParams.SignedCRT, watched) {
		t.Errorf("the Identity holds %q, want the certificate the watch brought", id.Spec.AuthParams.SignedCRT)
	}
	evs := controllertest.Events(e.rec)
	if len(evs) != 3 || !hasEvent(evs[0:1], "Normal", authv1beta1.ReasonCertificateRenewed) || !hasEvent(evs[1:2], "Normal", authv1beta1.ReasonCertificateRenewed) ||
		!hasEvent(evs[2:3], "Warning", authv1beta1.ReasonRenewalRefused) {
		t.Errorf("events %v, want two pick-ups and a refusal", evs)
	}
}

// TestFollowRenewWhenTenantForbidden: a provider that does not let the identity read its
// Tenant (Liqo) is followed through a Renew: the consumer creates its own (its key and a
// CSR of it) and takes the certificate its answer publishes, checked like any other.
func TestFollowRenewWhenTenantForbidden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
	}{{"a Renew to create", false}, {"a Renew already there", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			answer := e.pinned.leaf(e.key.Public(), testID, 20, 20*time.Hour)
			fw := watch.NewFake()
			var objs []client.Object
			if tc.exists {
				objs = append(objs, &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: providerNS, Name: e.key2().Name},
					Status: authv1beta1.RenewStatus{AuthParams: &authv1beta1.AuthParams{SignedCRT: answer}}})
			}
			rc := remote(t, fw, true, objs...)
			if _, err := e.r.follow(context.Background(), rc, e.key2(), &authv1beta1.TenantList{}, []client.ListOption{client.InNamespace(providerNS)}); !apierrors.IsForbidden(err) {
				t.Fatalf("the Tenant list: %v", err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = e.r.followRenew(context.Background(), rc, e.key2(), providerNS, e.key)
			}()
			if !tc.exists {
				rn := &authv1beta1.Renew{}
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if rc.Get(context.Background(), client.ObjectKey{Namespace: providerNS, Name: e.key2().Name}, rn) == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("no Renew was created")
					}
				}
				if rn.Spec.ConsumerClusterID != testID || rn.Spec.IdentityType != authv1beta1.ControlPlaneIdentityType {
					t.Errorf("the Renew is %+v", rn.Spec)
				}
				if _, err := authn.ValidateCSR(rn.Spec.CSR, e.key.Public(), testID); err != nil {
					t.Errorf("its CSR: %v", err)
				}
				rn.Status.AuthParams = &authv1beta1.AuthParams{SignedCRT: answer}
				fw.Modify(rn)
			}
			fw.Stop()
			<-done
			id, _ := e.read(t)
			if !bytes.Equal(id.Spec.AuthParams.SignedCRT, answer) {
				t.Error("the Renew's answer was not picked up")
			}
		})
	}
}
