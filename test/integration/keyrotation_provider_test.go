package integration

import (
	"context"
	"crypto"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

// rotationForge is what the author of a key-rotation Renew chooses: which keys sign the
// request, over which Tenant UID (zero values: the honest request).
type rotationForge struct {
	oldSigner, newSigner crypto.Signer
	tenantUID            string
}

// rotationRenewOf is the key-rotation Renew consumer c writes in its tenant namespace on
// provider p to move from key old to key next, over the Tenant with UID tenantUID, as f
// forges it.
func rotationRenewOf(t *testing.T, c, p *site, old, next crypto.Signer, tenantUID string, f rotationForge) *authv1beta1.Renew {
	t.Helper()
	if f.oldSigner == nil {
		f.oldSigner = old
	}
	if f.newSigner == nil {
		f.newSigner = next
	}
	if f.tenantUID == "" {
		f.tenantUID = tenantUID
	}
	csr, err := authn.ForgeKeyBoundCSRFor(next, c.id, wire.UserGroup)
	require.NoError(t, err)
	pub, err := authn.MarshalPublicKey(next.Public())
	require.NoError(t, err)
	rot := rotationOf(t, c, p, old, next, f.tenantUID, csr)
	sign := func(k crypto.Signer) string {
		sig, err := authn.SignRotation(k, rot)
		require.NoError(t, err)
		return base64.StdEncoding.EncodeToString(sig)
	}
	return &authv1beta1.Renew{
		ObjectMeta: metav1.ObjectMeta{Namespace: wire.TenantNamespaceName(c.id), Name: wire.KeyRotationRenewName,
			Labels: map[string]string{wire.RemoteClusterIDLabel: c.id, wire.ManagedByLabel: wire.ManagedByValue},
			Annotations: map[string]string{wire.RotationFromAnnotation: rot.From,
				wire.RotationOldSignatureAnnotation: sign(f.oldSigner), wire.RotationNewSignatureAnnotation: sign(f.newSigner)}},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(c.id), IdentityType: authv1beta1.ControlPlaneIdentityType, PublicKey: pub, CSR: csr},
	}
}

func rotationOf(t *testing.T, c, p *site, old, next crypto.Signer, tenantUID string, csr []byte) authn.Rotation {
	t.Helper()
	from, err := authn.Fingerprint(old.Public())
	require.NoError(t, err)
	to, err := authn.Fingerprint(next.Public())
	require.NoError(t, err)
	return authn.Rotation{ConsumerID: c.id, ProviderID: p.id, TenantUID: tenantUID, From: from, To: to, CSRDigest: authn.CSRDigest(csr)}
}

// putRenew replaces the key-rotation Renew with rn, as client id (the tenant's own
// identity), and returns its UID.
func putRenew(t *testing.T, id client.Client, rn *authv1beta1.Renew) types.UID {
	t.Helper()
	ctx := context.Background()
	old := &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: rn.Namespace, Name: rn.Name}}
	require.NoError(t, client.IgnoreNotFound(id.Delete(ctx, old)))
	eventually(t, 10*time.Second, "the old Renew gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(id.Get(ctx, client.ObjectKeyFromObject(old), &authv1beta1.Renew{})), nil
	})
	rn = rn.DeepCopy()
	require.NoError(t, id.Create(ctx, rn))
	return rn.UID
}

// waitRenewEvent waits for an Event with reason about the Renew with UID uid.
func waitRenewEvent(t *testing.T, p *site, ns string, uid types.UID, reason string) {
	t.Helper()
	eventually(t, 20*time.Second, "an Event "+reason+" about the key-rotation Renew", func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := p.client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.UID == uid && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

// oldSubjectAllowed asks, with the provider's administrator, whether user id with the
// groups of a certificate of Liqo's form may get its Tenant.
func oldSubjectAllowed(t *testing.T, p *site, id, ns string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: id, Groups: []string{wire.UserGroup, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: authv1beta1.GroupVersion.Group, Resource: "tenants", Name: id}}}
	require.NoError(t, p.client.Create(context.Background(), sar))
	return sar.Status.Allowed
}

// TestKeyRotationProviderMovesAConsumer acts as a consumer by hand, with its own identity
// (the tenant's certificate, the weakest principal that may write the Renew): forged
// rotation requests change nothing; the honest one gets a certificate for the new key
// while the old identity keeps working; a done signature by the old key ends nothing; the
// one by the new key ends the rotation, after which the old subject is refused by a
// SubjectAccessReview and a request with the old certificate is refused. Then the
// provider rotates its own key: every Tenant is sealed again, issuance keeps working, and
// the previous key is retired without breaking anything.
func TestKeyRotationProviderMovesAConsumer(t *testing.T) {
	t.Parallel()
	p := peerWithManager(t)
	ctx := context.Background()
	c, pr := p.consumer, p.provider
	oldID := newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, pr)))
	oldKey, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	next, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	other, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	oldFP, _ := authn.Fingerprint(oldKey.Public())
	newFP, _ := authn.Fingerprint(next.Public())
	var tn authv1beta1.Tenant
	require.NoError(t, oldID.Get(ctx, p.key, &tn), "the tenant reads its Tenant")
	unchanged := func(what string) {
		t.Helper()
		var now authv1beta1.Tenant
		require.NoError(t, pr.client.Get(ctx, p.key, &now))
		assert.Equal(t, string(tn.Spec.PublicKey), string(now.Spec.PublicKey), "%s moved the Tenant's key", what)
		assert.Equal(t, oldFP, now.Status.AcceptedKeyFingerprint, "%s changed the acceptance", what)
		rec, recErr := cluster.GetTenantRecord(ctx, pr.client, wire.DefaultLiqoNamespace, c.id)
		require.NoError(t, recErr)
		assert.Nil(t, rec.KeyRotation, "%s recorded a rotation", what)
	}

	for _, f := range []struct {
		name   string
		forge  rotationForge
		reason string
	}{
		{"signed by another old key", rotationForge{oldSigner: other}, authv1beta1.ReasonKeyRotationOldSignatureInvalid},
		{"signed by another new key", rotationForge{newSigner: other}, authv1beta1.ReasonKeyRotationNewSignatureInvalid},
		{"over another Tenant", rotationForge{tenantUID: "another-tenant"}, authv1beta1.ReasonKeyRotationOldSignatureInvalid},
	} {
		uid := putRenew(t, oldID, rotationRenewOf(t, c, pr, oldKey, next, string(tn.UID), f.forge))
		waitRenewEvent(t, pr, p.tn, uid, f.reason)
		unchanged(f.name)
	}

	// The honest request.
	honest := rotationRenewOf(t, c, pr, oldKey, next, string(tn.UID), rotationForge{})
	uid := putRenew(t, oldID, honest)
	waitRenewEvent(t, pr, p.tn, uid, authv1beta1.ReasonKeyRotationRecorded)
	var answered authv1beta1.Renew
	eventually(t, 30*time.Second, "the Renew answered with the new key's certificate", func(ctx context.Context) (bool, error) {
		if getErr := oldID.Get(ctx, client.ObjectKeyFromObject(honest), &answered); getErr != nil {
			return false, getErr
		}
		if !answered.Status.AuthParams.HasCertificate() {
			return false, nil
		}
		got, parseErr := authn.ParseCertificate(answered.Status.AuthParams.SignedCRT)
		return parseErr == nil && authn.PublicKeysEqual(got.PublicKey, next.Public()), nil
	})
	cert, err := authn.ParseCertificate(answered.Status.AuthParams.SignedCRT)
	require.NoError(t, err)
	group, _ := authn.KeyGroup(c.id, next.Public())
	assert.Equal(t, c.id, cert.Subject.CommonName)
	assert.Equal(t, group, authn.CertificateKeyGroup(cert), "the new certificate is key-bound")
	newCfg := restConfigFromKubeconfig(t, kubeconfigOf(t, c, pr))
	newCfg.CertData = answered.Status.AuthParams.SignedCRT
	newCfg.KeyData, err = authn.MarshalPrivateKey(next)
	require.NoError(t, err)
	newID := newClient(t, newCfg)
	require.NoError(t, newID.Get(ctx, p.key, &authv1beta1.Tenant{}), "the new key's certificate works")
	require.NoError(t, oldID.Get(ctx, p.key, &authv1beta1.Tenant{}), "the old identity keeps working until the rotation is done")
	var rb rbacv1.RoleBinding
	require.NoError(t, pr.client.Get(ctx, client.ObjectKey{Namespace: p.tn, Name: wire.ControlPlaneBindingName}, &rb))
	assert.ElementsMatch(t, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: c.id}}, rb.Subjects)

	// A done signature by the old key ends nothing.
	rot := rotationOf(t, c, pr, oldKey, next, string(tn.UID), honest.Spec.CSR)
	setDone := func(k crypto.Signer) {
		t.Helper()
		sig, signErr := authn.SignRotationDone(k, rot)
		require.NoError(t, signErr)
		require.NoError(t, oldID.Get(ctx, client.ObjectKeyFromObject(honest), &answered))
		answered.Annotations[wire.RotationDoneSignatureAnnotation] = base64.StdEncoding.EncodeToString(sig)
		require.NoError(t, oldID.Update(ctx, &answered))
	}
	setDone(oldKey)
	waitRenewEvent(t, pr, p.tn, uid, authv1beta1.ReasonKeyRotationDoneSignatureInvalid)
	rec, err := cluster.GetTenantRecord(ctx, pr.client, wire.DefaultLiqoNamespace, c.id)
	require.NoError(t, err)
	require.NotNil(t, rec.KeyRotation)
	assert.False(t, rec.KeyRotation.Done, "a done signature by the old key ended the rotation")
	require.NoError(t, oldID.Get(ctx, p.key, &authv1beta1.Tenant{}), "the old identity still works")

	// By the new key: done, and the old subject authorizes nothing.
	setDone(next)
	waitRenewEvent(t, pr, p.tn, uid, authv1beta1.ReasonKeyRotationDone)
	rec, err = cluster.GetTenantRecord(ctx, pr.client, wire.DefaultLiqoNamespace, c.id)
	require.NoError(t, err)
	assert.True(t, rec.KeyRotation.Done)
	assert.NotNil(t, rec.KeyRotation.Revoked, "the proof is recorded")
	assert.False(t, oldSubjectAllowed(t, pr, c.id, p.tn), "a SubjectAccessReview still allows the old subject")
	err = oldID.Get(ctx, p.key, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsForbidden(err), "a request with the old certificate: %v", err)
	require.NoError(t, newID.Get(ctx, p.key, &authv1beta1.Tenant{}), "the new identity works")

	// The old key, stolen now, moves nothing: a request from it to the thief's key.
	uid = putRenew(t, newID, rotationRenewOf(t, c, pr, oldKey, other, string(tn.UID), rotationForge{}))
	waitRenewEvent(t, pr, p.tn, uid, authv1beta1.ReasonKeyRotationFromMismatch)
	require.NoError(t, pr.client.Get(ctx, p.key, &tn))
	assert.Equal(t, newFP, tn.Status.AcceptedKeyFingerprint)
	err = oldID.Get(ctx, p.key, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsForbidden(err), "the replay revived the old certificate: %v", err)

	// The provider rotates its own key: every Tenant is sealed again with the new one.
	_, err = cluster.StageNextKey(ctx, pr.client, wire.DefaultLiqoNamespace, authn.Ed25519)
	require.NoError(t, err)
	keys, err := cluster.SwitchToNextKey(ctx, pr.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "every Tenant sealed again with the provider's new key", func(ctx context.Context) (bool, error) {
		left, progressErr := acceptance.TenantsSealedBy(ctx, pr.client, keys.Previous)
		return len(left) == 0, progressErr
	})
	require.NoError(t, newID.Get(ctx, p.key, &authv1beta1.Tenant{}), "the consumer works after the provider's switch")
	_, errOut := mustCLI(t, "renew", "tenant", c.id, "--kubeconfig", pr.cp.Kubeconfig)
	assert.Contains(t, errOut, "issued, valid until", "issuance works after the provider's switch")
	_, err = cluster.RetirePreviousKey(ctx, pr.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	_, errOut = mustCLI(t, "renew", "tenant", c.id, "--kubeconfig", pr.cp.Kubeconfig)
	assert.Contains(t, errOut, "issued, valid until", "issuance works after the previous key is retired")
	require.NoError(t, pr.client.Get(ctx, p.key, &tn))
	assert.Equal(t, newFP, tn.Status.AcceptedKeyFingerprint)
	waitTenantCondition(t, pr, p.key, authv1beta1.ConditionReady, metav1.ConditionTrue, authv1beta1.ReasonReady)
}
