package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
)

// Algorithm is the kind of key pair a cluster holds.
type Algorithm string

const (
	// Ed25519 is the default cluster key algorithm.
	Ed25519 Algorithm = "ed25519"
	// RSA2048 is the compatibility algorithm, for providers whose TLS stack refuses Ed25519.
	RSA2048 Algorithm = "rsa-2048"
)

// PEM block types of the keys this package reads and writes.
const (
	PEMTypePrivateKey = "PRIVATE KEY"
	PEMTypePublicKey  = "PUBLIC KEY"
)

// MaxPublicKeySize bounds a public key given by another cluster, before parsing.
const MaxPublicKeySize = 8 << 10

// minRSABits and maxRSABits bound the RSA keys accepted from other clusters.
const (
	minRSABits = 2048
	maxRSABits = 8192
)

// GenerateKey creates a new cluster key pair of the given algorithm.
func GenerateKey(alg Algorithm) (crypto.Signer, error) {
	switch alg {
	case Ed25519, "":
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("unknown key algorithm %q: use %q or %q", alg, Ed25519, RSA2048)
	}
}

// MarshalPrivateKey encodes a private key as PEM PKCS#8 ("PRIVATE KEY").
func MarshalPrivateKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypePrivateKey, Bytes: der}), nil
}

// ParsePrivateKey decodes a PEM PKCS#8 private key of an algorithm a cluster may hold
// (Ed25519 or RSA).
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	block, err := singlePEMBlock(data, PEMTypePrivateKey)
	if err != nil {
		return nil, refuse(ReasonPrivateKeyInvalid, "the cluster private key is not a single PEM PRIVATE KEY block", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonPrivateKeyInvalid, "the cluster private key is not valid PKCS#8", err)
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	default:
		return nil, refuse(ReasonPrivateKeyInvalid, fmt.Sprintf("the cluster private key has unsupported type %T", key), nil)
	}
}

// MarshalPublicKey encodes a public key as PEM PKIX ("PUBLIC KEY").
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypePublicKey, Bytes: der}), nil
}

// ParsePublicKey decodes a public key sent by another cluster: a single PEM PKIX block, or
// the legacy raw 32-byte Ed25519 form of early Liqo releases. It accepts Ed25519, RSA
// (2048 to 8192 bits) and ECDSA on P-256, P-384 or P-521.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	if len(data) > MaxPublicKeySize {
		return nil, refuse(ReasonPublicKeyInvalid, fmt.Sprintf("the public key is %d bytes, more than the %d allowed", len(data), MaxPublicKeySize), nil)
	}
	if len(data) == ed25519.PublicKeySize && !strings.HasPrefix(string(data), "-----") {
		return ed25519.PublicKey(append([]byte(nil), data...)), nil
	}
	block, err := singlePEMBlock(data, PEMTypePublicKey)
	if err != nil {
		return nil, refuse(ReasonPublicKeyInvalid, "the public key is neither a single PEM PUBLIC KEY block nor a raw 32-byte Ed25519 key", err)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonPublicKeyInvalid, "the public key is not a valid PKIX key", err)
	}
	if err := checkPublicKeyType(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

func checkPublicKeyType(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return refuse(ReasonPublicKeyTypeNotAllowed, fmt.Sprintf("RSA keys must have %d to %d bits, this one has %d", minRSABits, maxRSABits, bits), nil)
		}
		return nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return nil
		}
		return refuse(ReasonPublicKeyTypeNotAllowed, "ECDSA keys must be on P-256, P-384 or P-521", nil)
	default:
		return refuse(ReasonPublicKeyTypeNotAllowed, fmt.Sprintf("public keys of type %T are not allowed: use Ed25519, RSA or ECDSA", pub), nil)
	}
}

// Fingerprint returns "sha256:" followed by the lowercase hex SHA-256 of the key's PKIX DER.
func Fingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("fingerprinting public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// PublicKeysEqual reports whether two public keys are the same key.
func PublicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && b != nil && eq.Equal(b)
}

// singlePEMBlock decodes exactly one PEM block of the wanted type, with nothing but white
// space after it and no headers.
func singlePEMBlock(data []byte, wantType string) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block found")
	}
	if block.Type != wantType {
		return nil, fmt.Errorf("PEM block is %q, want %q", block.Type, wantType)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("PEM block has headers")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("data after the PEM block")
	}
	return block, nil
}

// ValidateFingerprint checks the form "sha256:" followed by 64 lowercase hex digits.
func ValidateFingerprint(fp string) error {
	hexPart, ok := strings.CutPrefix(fp, "sha256:")
	if _, err := hex.DecodeString(hexPart); !ok || err != nil || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return fmt.Errorf("fingerprint %q is not of the form sha256:<64 lowercase hex digits>", fp)
	}
	return nil
}
