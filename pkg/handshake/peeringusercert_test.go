package handshake

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestPeeringUserRefusals: a deleted or expired peering user is named as such, with what
// to ask the provider's administrator for, instead of a raw RBAC error.
func TestPeeringUserRefusals(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	p := &peeringUserCert{User: "liqo-peer-user-cl-consumer-0a1b2c", NotAfter: now.Add(time.Hour)}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "liqo-nonce", nil)
	ask := "liqoctl generate peering-user --consumer-cluster-id cl-consumer"
	s := &Side{Scope: "remote", peeringUser: p}
	for _, tc := range []struct {
		err  error
		now  time.Time
		want string
	}{
		{forbidden, now, "peering user liqo-peer-user-cl-consumer-0a1b2c may not do this: it was deleted"},
		{apierrors.NewUnauthorized("x509"), now, "the provider no longer accepts the certificate of peering user liqo-peer-user-cl-consumer-0a1b2c"},
		{forbidden, now.Add(2 * time.Hour), "peering user liqo-peer-user-cl-consumer-0a1b2c expired at 2026-11-23T13:00:00Z"},
	} {
		got := p.explain(tc.err, tc.now)
		if !strings.Contains(got, tc.want) || !strings.Contains(got, ask) {
			t.Errorf("%v: %s", tc.err, got)
		}
	}
	if err := s.Explain(forbidden, "reading the nonce"); !strings.HasPrefix(err.Error(), "(remote) reading the nonce: peering user") {
		t.Errorf("Explain: %v", err)
	}
	if err := (&Side{Scope: "remote"}).Explain(forbidden, "reading the nonce"); strings.Contains(err.Error(), "peering user") {
		t.Errorf("not a peering user: %v", err)
	}
}
