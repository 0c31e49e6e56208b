package authmanager

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

// TestCacheSharesWhatTenantsRepeat checks that two Tenants through the cache's transform
// share one copy of their CA and of their labels, and keep their own values intact.
func TestCacheSharesWhatTenantsRepeat(t *testing.T) {
	s := NewCacheScope("liqo")
	tenant := func(ns string) *authv1beta1.Tenant {
		return &authv1beta1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: "cl-a", Namespace: string([]byte(ns)), Labels: map[string]string{string([]byte("liqo.io/remote-cluster-id")): string([]byte("cl-a"))}},
			Status:     authv1beta1.TenantStatus{AuthParams: &authv1beta1.AuthParams{CA: []byte("-----BEGIN CERTIFICATE-----ca")}},
		}
	}
	a, b := tenant("liqo-tenant-cl-a"), tenant("liqo-tenant-cl-a")
	for _, x := range []*authv1beta1.Tenant{a, b} {
		if _, err := s.transform(x); err != nil {
			t.Fatal(err)
		}
	}
	if &a.Status.AuthParams.CA[0] != &b.Status.AuthParams.CA[0] {
		t.Error("the two Tenants keep two copies of the same CA")
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("the two Tenants keep two copies of their namespace")
	}
	for k, v := range a.Labels {
		if k != "liqo.io/remote-cluster-id" || v != "cl-a" {
			t.Errorf("label %s=%s changed", k, v)
		}
	}
	other := tenant("liqo-tenant-cl-b")
	other.Status.AuthParams.CA = []byte("another CA")
	if _, err := s.transform(other); err != nil {
		t.Fatal(err)
	}
	if string(other.Status.AuthParams.CA) != "another CA" || string(a.Status.AuthParams.CA) != "-----BEGIN CERTIFICATE-----ca" {
		t.Error("sharing changed a CA")
	}
}
