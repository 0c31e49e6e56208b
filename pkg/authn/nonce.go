package authn

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// NonceSize is the number of random bytes of a nonce.
const NonceSize = 64

// NonceLength is the length of a canonical nonce: standard base64, with padding, of
// NonceSize bytes.
const NonceLength = 88

// NewNonce returns a fresh nonce: NonceSize bytes from the system CSPRNG, encoded as
// standard base64 with padding.
func NewNonce() (string, error) {
	b := make([]byte, NonceSize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes for the nonce: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// CheckNonce verifies that s is exactly the canonical encoding of NonceSize bytes: the
// only input a cluster ever signs with its key.
func CheckNonce(s string) error {
	if len(s) != NonceLength {
		return refuse(ReasonNonceNotCanonical, fmt.Sprintf("a nonce is %d base64 characters, got %d", NonceLength, len(s)), nil)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != NonceSize || base64.StdEncoding.EncodeToString(b) != s {
		return refuse(ReasonNonceNotCanonical, fmt.Sprintf("a nonce is the standard base64 encoding of %d bytes", NonceSize), err)
	}
	return nil
}
