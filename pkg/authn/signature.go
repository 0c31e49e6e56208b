package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
)

// MaxSignatureSize bounds a signature given by another cluster (an RSA-8192 signature).
const MaxSignatureSize = 1024

// SignNonce signs a nonce with the cluster key. The signed message is the ASCII text of the
// nonce, not its decoded bytes: Ed25519 signs it directly, RSA signs its SHA-256 with
// PKCS#1 v1.5. Anything but a canonical nonce is refused, so the cluster key never signs
// data of someone else's choosing.
func SignNonce(key crypto.Signer, nonce string) ([]byte, error) {
	if err := CheckNonce(nonce); err != nil {
		return nil, err
	}
	return sign(key, []byte(nonce))
}

// sign signs msg with a cluster key: Ed25519 directly, RSA with PKCS#1 v1.5 over SHA-256.
func sign(key crypto.Signer, msg []byte) ([]byte, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(k, msg), nil
	case *rsa.PrivateKey:
		digest := sha256.Sum256(msg)
		return rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
	default:
		return nil, refuse(ReasonUnsupportedSigningMethod, fmt.Sprintf("cluster keys of type %T cannot sign: use Ed25519 or RSA", key), nil)
	}
}

// VerifyNonceSignature checks that sig is a signature of nonce by pub (Ed25519, RSA PKCS#1
// v1.5 over SHA-256, or ECDSA ASN.1 over SHA-256).
func VerifyNonceSignature(pub crypto.PublicKey, nonce string, sig []byte) error {
	if err := CheckNonce(nonce); err != nil {
		return err
	}
	if len(sig) == 0 || len(sig) > MaxSignatureSize {
		return refuse(ReasonSignatureInvalid, fmt.Sprintf("the signature is %d bytes: it must be 1 to %d", len(sig), MaxSignatureSize), nil)
	}
	if err := checkPublicKeyType(pub); err != nil {
		return err
	}
	if !verify(pub, []byte(nonce), sig) {
		return refuse(ReasonSignatureInvalid, "the nonce signature does not verify with the tenant's public key: it was made by another key or over another nonce", nil)
	}
	return nil
}

// verify checks sig over msg with pub: Ed25519, RSA PKCS#1 v1.5 over SHA-256, or ECDSA
// ASN.1 over SHA-256.
func verify(pub crypto.PublicKey, msg, sig []byte) bool {
	digest := sha256.Sum256(msg)
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(k, msg, sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest[:], sig)
	}
	return false
}
