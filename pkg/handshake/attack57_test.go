package handshake

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestAttack57ExplainQuotaForAPeeringUser (review of 0c25d5c): the quota case now comes
// before the peering user's. A peering user (the consumer's administrator) can neither
// remove Secrets from the provider's tenant namespace nor raise its quota: its error should
// say to ask the provider's administrator, as every other refusal of a peering user does.
func TestAttack57ExplainQuotaForAPeeringUser(t *testing.T) {
	p := &peeringUserCert{User: "liqo-peer-user-cl-consumer-0a1b2c", NotAfter: time.Now().Add(time.Hour)}
	s := &Side{Scope: "remote", peeringUser: p}
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "liqo-nonce",
		errors.New("exceeded quota: secrets, requested: secrets=1, used: secrets=3, limited: secrets=3"))
	err := s.Explain(quota, "creating the nonce")
	if !strings.Contains(err.Error(), "provider's administrator") {
		t.Errorf("a peering user is told to fix the provider's quota itself: %v", err)
	}
}
