package handshake

import (
	"context"
	"crypto"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ForgeTenant builds the consumer's Tenant for the provider's tenant namespace
// providerTN: its public key (PEM), its control-plane CSR, and its signature of the nonce.
func ForgeTenant(consumerID string, key crypto.Signer, signature []byte, providerTN, proxyURL string) (*authv1beta1.Tenant, error) {
	if err := authn.ValidateProxyURL(proxyURL); err != nil {
		return nil, err
	}
	pub, err := authn.MarshalPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	csr, err := authn.ForgeCSR(key, consumerID)
	if err != nil {
		return nil, err
	}
	t := &authv1beta1.Tenant{
		TypeMeta: metav1.TypeMeta{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Tenant"},
		ObjectMeta: metav1.ObjectMeta{Name: consumerID, Namespace: providerTN,
			Labels: map[string]string{cluster.RemoteClusterIDLabel: consumerID}},
		Spec: authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(consumerID), PublicKey: pub, CSR: csr, Signature: signature},
	}
	if proxyURL != "" {
		t.Spec.ProxyURL = &proxyURL
	}
	return t, nil
}

// ApplyTenant server-side applies the Tenant on the provider. Only the fields the
// consumer owns are set: an administrator's tenantCondition is kept.
func ApplyTenant(ctx context.Context, p *Side, t *authv1beta1.Tenant) error {
	if err := cluster.Apply(ctx, p.Client, t, cluster.FieldOwner); err != nil {
		return p.Explain(err, "applying the Tenant")
	}
	return nil
}

// nonceGrace is how long a Tenant refused for a missing nonce is given before the
// refusal is final: the provider may not have seen the nonce yet.
const nonceGrace = 3 * time.Second

// WaitTenant waits until the provider accepted the Tenant and published a certificate
// for it that is valid at validAt. A refusal ends the wait at once with the provider's
// reason.
func WaitTenant(ctx context.Context, p *Side, key client.ObjectKey, validAt time.Time) (*authv1beta1.Tenant, error) {
	return waitObject(ctx, p, key, &authv1beta1.TenantList{}, "the provider to accept the Tenant and issue its certificate", "waiting for the Tenant status",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			done, state, err := tenantDone(t)
			if done && !certValid(t, validAt) {
				return false, "the published certificate has expired: waiting for the provider to renew it", nil
			}
			return done, state, err
		})
}

// WaitLiqoTenant waits until Liqo's controllers on the provider published, in the
// Tenant's status, a certificate for the consumer's key pub (and cluster ID consumerID)
// that is valid at validAt and chains to the CA published with it: all Liqo promises,
// since it writes no conditions.
func WaitLiqoTenant(ctx context.Context, p *Side, key client.ObjectKey, pub crypto.PublicKey, consumerID string, validAt time.Time) (*authv1beta1.Tenant, error) {
	return waitObject(ctx, p, key, &authv1beta1.TenantList{}, "Liqo's controllers on the provider to issue the Tenant's certificate", "waiting for the Tenant status",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			if _, err := verifyPublished(t, pub, consumerID, validAt); err != nil {
				return false, fmt.Sprintf("%v (Liqo's controllers run there: %s)", err, p.Liqo), nil
			}
			return true, "", nil
		})
}

// tenantDone decides whether a Tenant is ready, still pending, or refused.
func tenantDone(t *authv1beta1.Tenant) (bool, string, error) {
	if t.Status.ObservedGeneration < t.Generation {
		return false, "the provider has not looked at the Tenant yet: is liqo-auth-manager running there?", nil
	}
	ready := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionReady)
	if ready != nil && ready.Status == metav1.ConditionTrue && t.Status.AuthParams.HasCertificate() {
		return true, "", nil
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionAuthenticated); c != nil && c.Status == metav1.ConditionFalse {
		if c.Reason == string(authv1beta1.ReasonNonceMissing) && time.Since(c.LastTransitionTime.Time) < nonceGrace {
			return false, c.Message, nil
		}
		return false, "", fmt.Errorf("the provider refused the handshake (%s): %s", c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, authv1beta1.ConditionCertificateIssued); c != nil && c.Status == metav1.ConditionFalse && c.Reason != authv1beta1.ReasonCertificatePending {
		return false, "", fmt.Errorf("the provider accepted the handshake but issued no certificate (%s): %s", c.Reason, c.Message)
	}
	if ready != nil {
		return false, ready.Message, nil
	}
	return false, "no status yet", nil
}
