package authmanager

import "testing"

func TestRole(t *testing.T) {
	for _, tc := range []struct {
		r                  Role
		provider, consumer bool
		name               string
	}{
		{0, false, false, "none"},
		{Provider, true, false, "provider"},
		{Consumer, false, true, "consumer"},
		{Both, true, true, "provider and consumer"},
	} {
		if tc.r.Has(Provider) != tc.provider || tc.r.Has(Consumer) != tc.consumer || tc.r.String() != tc.name {
			t.Errorf("%d: Has(Provider)=%t Has(Consumer)=%t String()=%q", tc.r, tc.r.Has(Provider), tc.r.Has(Consumer), tc.r.String())
		}
	}
	if Role(0).Has(0) {
		t.Error("no role has the empty role")
	}
}
