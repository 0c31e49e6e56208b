package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// fixedKey is a deterministic Ed25519 key for golden vectors.
func fixedKey() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// fixedNonce is the canonical encoding of the bytes 0..63.
func fixedNonce() string {
	b := make([]byte, NonceSize)
	for i := range b {
		b[i] = byte(i)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func mustKey(t testing.TB, alg Algorithm) crypto.Signer {
	t.Helper()
	k, err := GenerateKey(alg)
	require.NoError(t, err)
	return k
}

func TestKeyRoundTrip(t *testing.T) {
	for _, alg := range []Algorithm{Ed25519, RSA2048} {
		t.Run(string(alg), func(t *testing.T) {
			key := mustKey(t, alg)
			privPEM, err := MarshalPrivateKey(key)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(privPEM), "-----BEGIN PRIVATE KEY-----"))
			parsed, err := ParsePrivateKey(privPEM)
			require.NoError(t, err)
			assert.True(t, PublicKeysEqual(parsed.Public(), key.Public()))

			pubPEM, err := MarshalPublicKey(key.Public())
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(pubPEM), "-----BEGIN PUBLIC KEY-----"))
			pub, err := ParsePublicKey(pubPEM)
			require.NoError(t, err)
			assert.True(t, PublicKeysEqual(pub, key.Public()))
		})
	}
	_, err := GenerateKey("dsa")
	assert.ErrorContains(t, err, "unknown key algorithm")
}

func TestParsePublicKey(t *testing.T) {
	edPEM, _ := MarshalPublicKey(fixedKey().Public())
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallPEM, _ := MarshalPublicKey(&small.PublicKey)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	p224PEM, _ := MarshalPublicKey(&p224.PublicKey)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p256PEM, _ := MarshalPublicKey(&p256.PublicKey)
	cases := []struct {
		name   string
		in     []byte
		reason Reason
	}{
		{"pem ed25519", edPEM, ""},
		{"pem ed25519 with trailing newlines", append(append([]byte{}, edPEM...), "\n\n"...), ""},
		{"legacy raw ed25519", []byte(fixedKey().Public().(ed25519.PublicKey)), ""},
		{"ecdsa p256", p256PEM, ""},
		{"empty", nil, ReasonPublicKeyInvalid},
		{"garbage", []byte("not a key"), ReasonPublicKeyInvalid},
		{"31 raw bytes", make([]byte, 31), ReasonPublicKeyInvalid},
		{"private key block", mustPEM(t, PEMTypePrivateKey, []byte{1}), ReasonPublicKeyInvalid},
		{"two blocks", append(append([]byte{}, edPEM...), edPEM...), ReasonPublicKeyInvalid},
		{"trailing data", append(append([]byte{}, edPEM...), "x"...), ReasonPublicKeyInvalid},
		{"bad der", mustPEM(t, PEMTypePublicKey, []byte{0x30, 0x01}), ReasonPublicKeyInvalid},
		{"rsa 1024", smallPEM, ReasonPublicKeyTypeNotAllowed},
		{"ecdsa p224", p224PEM, ReasonPublicKeyTypeNotAllowed},
		{"oversized", make([]byte, MaxPublicKeySize+1), ReasonPublicKeyInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePublicKey(tc.in)
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.reason, ReasonOf(err), err.Error())
		})
	}
}

func mustPEM(t testing.TB, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestParsePrivateKeyRefusals(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	for name, in := range map[string][]byte{
		"empty":      nil,
		"public key": mustPEM(t, PEMTypePublicKey, []byte{1}),
		"bad pkcs8":  mustPEM(t, PEMTypePrivateKey, []byte{1, 2, 3}),
		"ecdsa":      mustPEM(t, PEMTypePrivateKey, ecDER),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePrivateKey(in)
			assert.Equal(t, ReasonPrivateKeyInvalid, ReasonOf(err))
		})
	}
}

func TestFingerprintGolden(t *testing.T) {
	fp, err := Fingerprint(fixedKey().Public())
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/golden-fingerprint.txt")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(want)), fp)
	assert.Len(t, fp, len("sha256:")+64)
	fp2, _ := Fingerprint(mustKey(t, Ed25519).Public())
	assert.NotEqual(t, fp, fp2)
	// PEM and legacy raw forms of one key have one fingerprint.
	raw, err := ParsePublicKey([]byte(fixedKey().Public().(ed25519.PublicKey)))
	require.NoError(t, err)
	fp3, _ := Fingerprint(raw)
	assert.Equal(t, fp, fp3)
}

func TestNonce(t *testing.T) {
	n, err := NewNonce()
	require.NoError(t, err)
	assert.Len(t, n, NonceLength)
	require.NoError(t, CheckNonce(n))
	n2, _ := NewNonce()
	assert.NotEqual(t, n, n2)

	canonical := fixedNonce()
	// Flip the last padding-adjacent character so that unused bits are set: decodes
	// leniently, but is not canonical.
	nonZeroPad := canonical[:85] + "x=="
	cases := map[string]string{
		"empty":               "",
		"short":               canonical[:87],
		"long":                canonical + "=",
		"url alphabet":        strings.NewReplacer("+", "-", "/", "_").Replace(strings.Repeat("+/", 43)) + "==",
		"non canonical pad":   nonZeroPad,
		"with newline":        canonical[:44] + "\n" + canonical[44:87],
		"not base64":          strings.Repeat("!", NonceLength),
		"decodes to 65 bytes": base64.StdEncoding.EncodeToString(make([]byte, 65))[:NonceLength],
		"arbitrary text":      strings.Repeat("a", NonceLength),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckNonce(in)
			require.Error(t, err)
			assert.Equal(t, ReasonNonceNotCanonical, ReasonOf(err))
		})
	}
	require.NoError(t, CheckNonce(canonical))
}

// TestSignatureGolden pins the wire format: Ed25519 over the ASCII text of the nonce.
func TestSignatureGolden(t *testing.T) {
	nonce := fixedNonce()
	sig, err := SignNonce(fixedKey(), nonce)
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/golden-signature.b64")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(want)), base64.StdEncoding.EncodeToString(sig))
	assert.True(t, ed25519.Verify(fixedKey().Public().(ed25519.PublicKey), []byte(nonce), sig), "message is the base64 text")
	require.NoError(t, VerifyNonceSignature(fixedKey().Public(), nonce, sig))
}

func TestSignVerify(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, alg := range []Algorithm{Ed25519, RSA2048} {
		t.Run(string(alg), func(t *testing.T) {
			key, other := mustKey(t, alg), mustKey(t, alg)
			nonce, _ := NewNonce()
			otherNonce, _ := NewNonce()
			sig, err := SignNonce(key, nonce)
			require.NoError(t, err)
			require.NoError(t, VerifyNonceSignature(key.Public(), nonce, sig))

			assert.Equal(t, ReasonSignatureInvalid, ReasonOf(VerifyNonceSignature(other.Public(), nonce, sig)), "other key")
			assert.Equal(t, ReasonSignatureInvalid, ReasonOf(VerifyNonceSignature(key.Public(), otherNonce, sig)), "other nonce")
			bad := append([]byte{}, sig...)
			bad[len(bad)-1] ^= 1
			assert.Equal(t, ReasonSignatureInvalid, ReasonOf(VerifyNonceSignature(key.Public(), nonce, bad)), "tampered")
			assert.Equal(t, ReasonSignatureInvalid, ReasonOf(VerifyNonceSignature(key.Public(), nonce, nil)), "empty")
			assert.Equal(t, ReasonSignatureInvalid, ReasonOf(VerifyNonceSignature(key.Public(), nonce, make([]byte, MaxSignatureSize+1))), "oversized")
			assert.Equal(t, ReasonNonceNotCanonical, ReasonOf(VerifyNonceSignature(key.Public(), "short", sig)))
		})
	}
	t.Run("ecdsa verification", func(t *testing.T) {
		nonce, _ := NewNonce()
		digest := sha256Sum([]byte(nonce))
		sig, err := ecdsa.SignASN1(rand.Reader, ec, digest)
		require.NoError(t, err)
		require.NoError(t, VerifyNonceSignature(&ec.PublicKey, nonce, sig))
	})
	t.Run("signer refuses non-nonces", func(t *testing.T) {
		for _, in := range []string{"", "hello", strings.Repeat("A", 200), fixedNonce()[:87] + "\n"} {
			_, err := SignNonce(fixedKey(), in)
			assert.Equal(t, ReasonNonceNotCanonical, ReasonOf(err), "%q", in)
		}
	})
	t.Run("ecdsa keys never sign", func(t *testing.T) {
		_, err := SignNonce(ec, fixedNonce())
		assert.Equal(t, ReasonUnsupportedSigningMethod, ReasonOf(err))
	})
}

func sha256Sum(b []byte) []byte {
	h := crypto.SHA256.New()
	h.Write(b)
	return h.Sum(nil)
}

// TestCSRGolden pins the control-plane CSR: Ed25519 CSRs are deterministic.
func TestCSRGolden(t *testing.T) {
	csr, err := ForgeCSR(fixedKey(), "cl-consumer")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/golden-csr.pem")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(csr))
	parsed, err := ValidateCSR(csr, fixedKey().Public(), "cl-consumer")
	require.NoError(t, err)
	assert.Equal(t, []string{wire.UserGroup}, parsed.Subject.Organization)
	assert.Empty(t, parsed.Extensions)
}

// TestLiqoPublishedVectors checks wire compatibility with the CSR, legacy raw public key
// and signed certificate published in Liqo's manual-authentication documentation.
func TestLiqoPublishedVectors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		return b
	}
	pub, err := ParsePublicKey(read("liqo-docs-publickey.raw"))
	require.NoError(t, err)
	_, err = ValidateCSR(read("liqo-docs-csr.pem"), pub, "cl01")
	require.NoError(t, err, "a CSR made by Liqo must be accepted")
	_, err = ValidateCSR(read("liqo-docs-csr.pem"), pub, "cl02")
	assert.Equal(t, ReasonCSRCommonNameMismatch, ReasonOf(err))

	issued := mustTime(t, "2024-08-01T00:00:00Z")
	cert, err := VerifyCertificate(read("liqo-docs-signedcrt.pem"), read("liqo-docs-ca.pem"), pub, "cl01", issued)
	require.NoError(t, err, "a certificate issued by a Liqo provider must be accepted")
	assert.Equal(t, []string{"liqo.io"}, cert.Subject.Organization)
	_, err = VerifyCertificate(read("liqo-docs-signedcrt.pem"), read("liqo-docs-ca.pem"), pub, "cl01", mustTime(t, "2026-01-01T00:00:00Z"))
	assert.Equal(t, ReasonCertificateExpired, ReasonOf(err))
}

type csrOpts struct {
	key      crypto.Signer
	subject  pkix.Name
	dns      []string
	ips      []net.IP
	emails   []string
	uris     []*url.URL
	extraExt []pkix.Extension
}

func makeCSR(t testing.TB, o csrOpts) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: o.subject, DNSNames: o.dns, IPAddresses: o.ips, EmailAddresses: o.emails, URIs: o.uris, ExtraExtensions: o.extraExt}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, o.key)
	require.NoError(t, err)
	return mustPEM(t, PEMTypeCSR, der)
}

func TestValidateCSR(t *testing.T) {
	const id = "cl-consumer"
	key, other := mustKey(t, Ed25519), mustKey(t, Ed25519)
	good := pkix.Name{CommonName: id, Organization: []string{wire.UserGroup}}
	valid := makeCSR(t, csrOpts{key: key, subject: good})
	block, _ := pem.Decode(valid)
	broken := append([]byte{}, block.Bytes...)
	broken[len(broken)-1] ^= 0xff
	u, _ := url.Parse("spiffe://x/y")
	cases := []struct {
		name   string
		csr    []byte
		reason Reason
	}{
		{"valid", valid, ""},
		{"valid rsa", makeCSR(t, csrOpts{key: mustKey(t, RSA2048), subject: good}), ReasonCSRKeyMismatch},
		{"oversized", append(append([]byte{}, valid...), make([]byte, MaxCSRSize)...), ReasonCSRTooLarge},
		{"garbage", []byte("garbage"), ReasonCSRNotPEM},
		{"empty", nil, ReasonCSRNotPEM},
		{"wrong pem type", mustPEM(t, "CERTIFICATE", block.Bytes), ReasonCSRNotPEM},
		{"two blocks", append(append([]byte{}, valid...), valid...), ReasonCSRMultipleBlocks},
		{"trailing bytes", append(append([]byte{}, valid...), "junk"...), ReasonCSRTrailingData},
		{"bad der", mustPEM(t, PEMTypeCSR, []byte{0x30, 0x03, 1, 2, 3}), ReasonCSRMalformed},
		{"broken self-signature", mustPEM(t, PEMTypeCSR, broken), ReasonCSRSelfSignatureInvalid},
		{"other key", makeCSR(t, csrOpts{key: other, subject: good}), ReasonCSRKeyMismatch},
		{"other cluster CN", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: "cl-other", Organization: []string{wire.UserGroup}}}), ReasonCSRCommonNameMismatch},
		{"CN with suffix", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: id + " ", Organization: []string{wire.UserGroup}}}), ReasonCSRCommonNameMismatch},
		{"no CN", makeCSR(t, csrOpts{key: key, subject: pkix.Name{Organization: []string{wire.UserGroup}}}), ReasonCSRCommonNameMismatch},
		{"system:masters", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: id, Organization: []string{"system:masters"}}}), ReasonCSROrganizationMismatch},
		{"extra organization", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: id, Organization: []string{wire.UserGroup, "system:masters"}}}), ReasonCSROrganizationMismatch},
		{"no organization", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: id}}), ReasonCSROrganizationMismatch},
		{"organizational unit", makeCSR(t, csrOpts{key: key, subject: pkix.Name{CommonName: id, Organization: []string{wire.UserGroup}, OrganizationalUnit: []string{"ops"}}}), ReasonCSRExtraSubject},
		{"duplicated CN", makeCSR(t, csrOpts{key: key, subject: pkix.Name{Organization: []string{wire.UserGroup}, ExtraNames: []pkix.AttributeTypeAndValue{{Type: oidCommonName, Value: id}, {Type: oidCommonName, Value: id}}}}), ReasonCSRCommonNameMismatch},
		{"dns SAN", makeCSR(t, csrOpts{key: key, subject: good, dns: []string{"kubernetes"}}), ReasonCSRSubjectAltNames},
		{"ip SAN", makeCSR(t, csrOpts{key: key, subject: good, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}), ReasonCSRSubjectAltNames},
		{"email SAN", makeCSR(t, csrOpts{key: key, subject: good, emails: []string{"a@b.c"}}), ReasonCSRSubjectAltNames},
		{"uri SAN", makeCSR(t, csrOpts{key: key, subject: good, uris: []*url.URL{u}}), ReasonCSRSubjectAltNames},
		{"other extension", makeCSR(t, csrOpts{key: key, subject: good, extraExt: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Value: []byte{0x30, 0x03, 0x01, 0x01, 0xff}}}}), ReasonCSRExtensions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateCSR(tc.csr, key.Public(), id)
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.reason, ReasonOf(err), err.Error())
			assert.NotEmpty(t, err.Error())
		})
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
