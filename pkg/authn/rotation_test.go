package authn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyBoundCSR(t *testing.T) {
	key, err := GenerateKey(Ed25519)
	require.NoError(t, err)
	other, err := GenerateKey(Ed25519)
	require.NoError(t, err)
	bound, err := ForgeKeyBoundCSRFor(key, "cl-a", "liqo.io")
	require.NoError(t, err)
	csr, err := ValidateCSR(bound, key.Public(), "cl-a")
	require.NoError(t, err, "a key-bound CSR passes")
	group, err := KeyGroup("cl-a", key.Public())
	require.NoError(t, err)
	assert.Equal(t, group, CSRKeyGroup(csr))
	assert.True(t, IsKeyGroup(group))
	reordered, err := forgeCSR(key, "cl-a", []string{group, "liqo.io"})
	require.NoError(t, err)
	_, err = ValidateCSR(reordered, key.Public(), "cl-a")
	require.NoError(t, err, "the order of a SET is the encoder's")

	otherGroup, err := KeyGroup("cl-a", other.Public())
	require.NoError(t, err)
	foreignUser, err := KeyGroup("cl-b", key.Public())
	require.NoError(t, err)
	for name, orgs := range map[string][]string{
		"another key's group":  {"liqo.io", otherGroup},
		"another user's group": {"liqo.io", foreignUser},
		"a group twice":        {group, group},
		"three":                {"liqo.io", group, group},
		"no liqo.io":           {"system:masters", group},
	} {
		t.Run(name, func(t *testing.T) {
			pem, err := forgeCSR(key, "cl-a", orgs)
			require.NoError(t, err)
			_, err = ValidateCSR(pem, key.Public(), "cl-a")
			assert.Equal(t, ReasonCSROrganizationMismatch, ReasonOf(err))
		})
	}
}

func TestRotationStatements(t *testing.T) {
	oldKey, err := GenerateKey(Ed25519)
	require.NoError(t, err)
	newKey, err := GenerateKey(Ed25519)
	require.NoError(t, err)
	r := Rotation{ConsumerID: "c", ProviderID: "p", TenantUID: "uid", From: "sha256:a", To: "sha256:b", CSRDigest: "d"}
	sig, err := SignRotation(oldKey, r)
	require.NoError(t, err)
	require.NoError(t, VerifyRotation(oldKey.Public(), r, sig))
	assert.Equal(t, ReasonRotationProofInvalid, ReasonOf(VerifyRotation(newKey.Public(), r, sig)), "another key")
	assert.Equal(t, ReasonRotationProofInvalid, ReasonOf(VerifyRotationDone(oldKey.Public(), r, sig)), "a request is no end")
	changed := r
	changed.To = "sha256:c"
	assert.Equal(t, ReasonRotationProofInvalid, ReasonOf(VerifyRotation(oldKey.Public(), changed, sig)), "another target")
	done, err := SignRotationDone(newKey, r)
	require.NoError(t, err)
	require.NoError(t, VerifyRotationDone(newKey.Public(), r, done))
	assert.Equal(t, ReasonRotationProofInvalid, ReasonOf(VerifyRotation(newKey.Public(), r, done)), "an end is no request")
	assert.Equal(t, ReasonAcceptanceSealInvalid, ReasonOf(VerifyAcceptanceSeal(oldKey.Public(), Acceptance{TenantUID: "uid", ClusterID: "c", KeyFingerprint: "sha256:b", CSRDigest: "d"}, sig)), "no seal")
	empty := r
	empty.TenantUID = ""
	_, err = SignRotation(oldKey, empty)
	assert.Equal(t, ReasonRotationProofInvalid, ReasonOf(err))
}
