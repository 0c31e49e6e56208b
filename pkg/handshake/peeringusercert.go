package handshake

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// peeringUserCert is the certificate of a peering user, as its kubeconfig holds it.
type peeringUserCert struct {
	User     string
	NotAfter time.Time
}

// DetectPeeringUser notes whether the side's credentials are a peering user's (a client
// certificate for liqo-peer-user-...), so that Explain words the refusals of one that
// was deleted or expired instead of printing a raw RBAC error.
func (s *Side) DetectPeeringUser() {
	s.peeringUser = peeringUserOf(s.Config)
}

// PeeringUser is the user name of the peering user the side's credentials are ("" when
// they are none, or DetectPeeringUser was not called).
func (s *Side) PeeringUser() string {
	if s.peeringUser == nil {
		return ""
	}
	return s.peeringUser.User
}

func peeringUserOf(cfg *rest.Config) *peeringUserCert {
	if cfg == nil {
		return nil
	}
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		data, _ = os.ReadFile(cfg.CertFile)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !strings.HasPrefix(cert.Subject.CommonName, wire.PeeringUserPrefix) {
		return nil
	}
	return &peeringUserCert{User: cert.Subject.CommonName, NotAfter: cert.NotAfter}
}

// consumer is the consumer the peering user was issued for.
func (p *peeringUserCert) consumer() string { return wire.PeeringUserConsumer(p.User) }

// explain words a refusal of the peering user's requests: expired, or deleted (its roles
// are gone) or no longer trusted, and what to ask the provider's administrator for.
func (p *peeringUserCert) explain(err error, now time.Time) string {
	ask := fmt.Sprintf("ask the provider's administrator for a new one (liqoctl generate peering-user --consumer-cluster-id %s) and run the command again with it", p.consumer())
	switch {
	case now.After(p.NotAfter):
		return fmt.Sprintf("peering user %s expired at %s: %s", p.User, p.NotAfter.UTC().Format(time.RFC3339), ask)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the provider no longer accepts the certificate of peering user %s (%v): %s", p.User, err, ask)
	}
	return fmt.Sprintf("peering user %s may not do this: it was deleted (liqoctl delete peering-user) or replaced by a newer one, and its permissions are gone (%v); %s", p.User, err, ask)
}

// PeeringUserRefusal is the provider's refusal of a request its peering user made: expired,
// deleted, retired or replaced. Its text says what to ask the provider's administrator for;
// it unwraps to the API server's error.
type PeeringUserRefusal struct {
	msg string
	err error
}

func (r *PeeringUserRefusal) Error() string { return r.msg }

// Unwrap returns the API server's refusal.
func (r *PeeringUserRefusal) Unwrap() error { return r.err }
