package providerslice

import (
	"testing"

	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestGrantedSliceKeepsItsAuthenticationChecks: a slice granted before (a Role records it) is still
// denied when its Tenant's acceptance is not sealed (a status writer's forgery) or when
// its CSR is for another key (the slice writer's): a grant skips only user/count checks.
func TestGrantedSliceKeepsItsAuthenticationChecks(t *testing.T) {
	in := passingInput(t)
	in.grants[in.slice.UID] = in.slice.Spec.Resources.DeepCopy()
	in.tenant.Status.AcceptanceSeal = []byte("forged")
	if v, _ := firstFailure(in, func(stage) error { return nil }); v == nil || v.check != "tenantAccepted" {
		t.Fatalf("unsealed tenant, granted slice: %+v", v)
	}
	in = passingInput(t)
	in.grants[in.slice.UID] = in.slice.Spec.Resources.DeepCopy()
	other, _ := authn.GenerateKey(authn.Ed25519)
	csr, _ := authn.ForgeCSRFor(other, in.user, testID)
	in.slice.Spec.CSR = csr
	if v, _ := firstFailure(in, func(stage) error { return nil }); v == nil || v.check != "csr" {
		t.Fatalf("foreign key, granted slice: %+v", v)
	}
}
