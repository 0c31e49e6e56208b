package providerslice

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// publicKeys are the public halves of this cluster's keys as they are now (none without
// a key source: then no seal verifies).
func (r *Reconciler) publicKeys(ctx context.Context) ([]crypto.PublicKey, error) {
	if r.Keys == nil {
		return nil, nil
	}
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []crypto.PublicKey
	for _, k := range ks.All() {
		out = append(out, k.Public())
	}
	return out, nil
}

// errNoKey says that this provider has no key to verify a seal with.
var errNoKey = errors.New("this provider has no key to verify the acceptance with")

// verifySealedByAny is acceptance.VerifySealed with any of keys: while a rotation is under
// way, a Tenant sealed by the previous or the staged key is accepted until it is sealed
// again with the current one.
func verifySealedByAny(t *authv1beta1.Tenant, keys []crypto.PublicKey) error {
	err := errNoKey
	for _, k := range keys {
		if err = acceptance.VerifySealed(t, k); err == nil {
			return nil
		}
	}
	return err
}

// parseCSR parses a PEM CSR without checking it (it was checked when the slice was
// decided).
func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("the CSR is not PEM encoded")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// keyGroup is the key group of the slice's accepted CSR ("" for Liqo's form): the slice's
// RoleBinding names that group instead of the slice's user.
func (in *input) keyGroup() string {
	csr, err := parseCSR(in.slice.Spec.CSR)
	if err != nil {
		return ""
	}
	return authn.CSRKeyGroup(csr)
}
