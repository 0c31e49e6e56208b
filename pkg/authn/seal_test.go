package authn

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcceptanceSeal(t *testing.T) {
	base := Acceptance{TenantUID: "uid-1", ClusterID: "cl-consumer", KeyFingerprint: "sha256:aa", CSRDigest: "bb"}
	for _, alg := range []Algorithm{Ed25519, RSA2048} {
		t.Run(string(alg), func(t *testing.T) {
			key := mustKey(t, alg)
			seal, err := SealAcceptance(key, base)
			require.NoError(t, err)
			require.NoError(t, VerifyAcceptanceSeal(key.Public(), base, seal))
			for name, changed := range map[string]Acceptance{
				"other Tenant":     {TenantUID: "uid-2", ClusterID: base.ClusterID, KeyFingerprint: base.KeyFingerprint, CSRDigest: base.CSRDigest},
				"other cluster":    {TenantUID: base.TenantUID, ClusterID: "cl-x", KeyFingerprint: base.KeyFingerprint, CSRDigest: base.CSRDigest},
				"other key":        {TenantUID: base.TenantUID, ClusterID: base.ClusterID, KeyFingerprint: "sha256:ab", CSRDigest: base.CSRDigest},
				"other CSR":        {TenantUID: base.TenantUID, ClusterID: base.ClusterID, KeyFingerprint: base.KeyFingerprint, CSRDigest: "bc"},
				"fields shifted":   {TenantUID: base.TenantUID + "\ncl-consumer", ClusterID: "sha256:aa", KeyFingerprint: "bb"},
				"everything empty": {},
			} {
				assert.Equal(t, ReasonAcceptanceSealInvalid, ReasonOf(VerifyAcceptanceSeal(key.Public(), changed, seal)), name)
			}
			assert.Equal(t, ReasonAcceptanceSealInvalid, ReasonOf(VerifyAcceptanceSeal(mustKey(t, alg).Public(), base, seal)), "another key's seal")
			assert.Equal(t, ReasonAcceptanceSealInvalid, ReasonOf(VerifyAcceptanceSeal(key.Public(), base, nil)), "no seal")
			assert.Equal(t, ReasonAcceptanceSealInvalid, ReasonOf(VerifyAcceptanceSeal(key.Public(), base, make([]byte, 4096))), "oversized")
		})
	}
}

// A seal and a nonce signature are never interchangeable: the noncesigner of a consumer
// must not be usable to forge a provider's seal, nor a seal to answer a challenge.
func TestSealIsNoNonceSignature(t *testing.T) {
	key := mustKey(t, Ed25519)
	a := Acceptance{TenantUID: "u", ClusterID: "c", KeyFingerprint: "f", CSRDigest: "d"}
	msg, ok := a.message()
	require.True(t, ok)
	assert.Error(t, CheckNonce(string(msg)), "a sealed message is never a canonical nonce")
	_, err := SignNonce(key, string(msg))
	assert.Error(t, err, "the nonce signer refuses to sign a sealed message")
	seal, err := SealAcceptance(key, a)
	require.NoError(t, err)
	nonce, err := NewNonce()
	require.NoError(t, err)
	assert.Error(t, VerifyNonceSignature(key.Public(), nonce, seal))
	sig, err := SignNonce(key, nonce)
	require.NoError(t, err)
	assert.Error(t, VerifyAcceptanceSeal(key.Public(), a, sig))
	assert.NotEmpty(t, base64.StdEncoding.EncodeToString(seal))

	_, err = SealAcceptance(key, Acceptance{TenantUID: "u", ClusterID: "c\nf", KeyFingerprint: "d"})
	assert.Error(t, err, "a field holding a line break is not sealed")
}

// FuzzAcceptanceMessage checks that the sealed message names one acceptance only: two
// acceptances that differ never give the same message, whatever their fields hold.
func FuzzAcceptanceMessage(f *testing.F) {
	f.Add("uid", "cl-a", "sha256:k", "d", "uid", "cl-a\nsha256:k", "d", "")
	f.Add("u", "c", "k", "d", "u", "c", "k", "d")
	f.Fuzz(func(t *testing.T, u1, c1, k1, d1, u2, c2, k2, d2 string) {
		a := Acceptance{TenantUID: u1, ClusterID: c1, KeyFingerprint: k1, CSRDigest: d1}
		b := Acceptance{TenantUID: u2, ClusterID: c2, KeyFingerprint: k2, CSRDigest: d2}
		ma, okA := a.message()
		mb, okB := b.message()
		if okA && okB && a != b && string(ma) == string(mb) {
			t.Fatalf("%+v and %+v are sealed as the same message", a, b)
		}
	})
}
