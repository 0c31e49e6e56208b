package handshake

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
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
			Labels: map[string]string{wire.RemoteClusterIDLabel: consumerID}},
		Spec: authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(consumerID), PublicKey: pub, CSR: csr, Signature: signature},
	}
	if proxyURL != "" {
		t.Spec.ProxyURL = &proxyURL
	}
	return t, nil
}

// ApplyTenant server-side applies the Tenant on the provider. Only the fields the
// consumer owns are set: an administrator's tenantCondition is kept. Where a
// liqo-auth-manager runs (p.ManagerRunning), the Tenant carries its finalizer from the
// start: the manager would add it to an accepted Tenant anyway, and finalizes every Tenant
// deleted, a refused one included.
func ApplyTenant(ctx context.Context, p *Side, t *authv1beta1.Tenant) error {
	if p.ManagerRunning {
		controllerutil.AddFinalizer(t, wire.TenantFinalizer)
	}
	if err := cluster.Apply(ctx, p.Client, t, wire.FieldOwner); err != nil {
		return p.Explain(err, "applying the Tenant")
	}
	return nil
}

// refusalGrace is how long a Tenant refused for a missing nonce, or for a namespace not
// recorded as its tenant namespace, is given before the refusal is final: the provider's
// controllers may not have seen yet the nonce or the record this command just wrote (they
// decide again when they do), and a Tenant left by an interrupted run is decided by
// in-process controllers as soon as they start, before this run's first steps.
const refusalGrace = 3 * time.Second

// WaitTenant waits until the provider accepted the Tenant and published a certificate
// for it that is valid at validAt, and that the provider's record says it published
// (whoever may write tenants/status could publish another CA, server or certificate; the
// provider's controllers put their own back). A refusal ends the wait at once with the
// provider's reason, and so does its administrator's denial (ErrDenied). While the key
// waits for their approval, the wait says so once and goes on; a Pair that does not wait
// for it (Pair.WaitForApproval false) gets ErrApprovalPending instead. t is the Tenant as
// this command applied or created it, and the wait starts from it (waitFrom), or only its
// namespace and name.
func WaitTenant(ctx context.Context, p *Side, t *authv1beta1.Tenant, validAt time.Time) (*authv1beta1.Tenant, error) {
	approval := approvalWaitOf(ctx)
	return waitObject(ctx, p, client.ObjectKeyFromObject(t), t, &authv1beta1.TenantList{}, "the provider to accept the Tenant and issue its certificate", "waiting for the Tenant status",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			if waiting, state, err := approval.check(ctx, p, t); waiting || err != nil {
				return false, state, err
			}
			done, state, err := tenantDone(t)
			if done && !certValid(t, validAt) {
				return false, "the published certificate has expired: waiting for the provider to renew it", nil
			}
			if done {
				if checkPublishedErr := p.checkPublished(ctx, t); checkPublishedErr != nil {
					if errors.Is(checkPublishedErr, cluster.ErrNotPublished) {
						return false, checkPublishedErr.Error() + ": waiting for the provider to publish its own", nil
					}
					return false, "", checkPublishedErr
				}
			}
			return done, state, err
		})
}

// checkPublished verifies what the Tenant t publishes against what the provider says it
// published (its tenant record, which the consumer's administrator and a peering user may
// read); on a provider whose record cannot be read, the CA must be one the kubeconfig
// already trusts for the provider.
func (s *Side) checkPublished(ctx context.Context, t *authv1beta1.Tenant) error {
	cert, err := authn.ParseCertificate(t.Status.AuthParams.SignedCRT)
	if err != nil {
		return fmt.Errorf("%w: %v", cluster.ErrNotPublished, err)
	}
	rec, err := s.Controllers().Record(ctx, s, string(t.Spec.ClusterID))
	if err != nil {
		return err
	}
	return s.checkPublishedBy(rec, t, cert)
}

// checkPublishedBy is checkPublished with the provider's record already read (nil: none).
func (s *Side) checkPublishedBy(rec *cluster.TenantRecord, t *authv1beta1.Tenant, cert *x509.Certificate) error {
	if err := checkPublishedProxy(t); err != nil {
		return err
	}
	if rec != nil && rec.PublishedCAFingerprint != "" {
		return rec.CheckPublished(t.Status.AuthParams, cert)
	}
	return s.checkTrustedCA(t.Status.AuthParams.CA)
}

// checkPublishedProxy verifies that the proxy a Tenant's status publishes is the one its
// spec asks for: the provider (this project's and Liqo's) copies it from there, and no
// record says more. A status writer's proxy would have the consumer reach the provider
// through a host of that writer's choosing.
func checkPublishedProxy(t *authv1beta1.Tenant) error {
	if got, asked := ptr.Deref(t.Status.AuthParams.ProxyURL, ""), ptr.Deref(t.Spec.ProxyURL, ""); got != asked {
		return fmt.Errorf("%w: proxy %q, while the Tenant asks for %q", cluster.ErrNotPublished, got, asked)
	}
	return nil
}

// checkTrustedCA verifies that a CA bundle a provider published shares a certificate with
// the CA this side's kubeconfig trusts for it: the status of a Tenant is written by the
// provider, and by whoever else may write tenants/status there. A kubeconfig with no CA of
// its own (the system's roots) cannot tell, and checks nothing.
func (s *Side) checkTrustedCA(published []byte) error {
	trusted := s.trustedCA()
	if len(trusted) == 0 {
		return nil
	}
	if authn.SharesCertificate(trusted, published) {
		return nil
	}
	fp, _ := authn.CAFingerprint(published)
	return fmt.Errorf("%w: CA %s, which the kubeconfig used to reach the provider does not trust", cluster.ErrNotPublished, fp)
}

// trustedCA is the CA bundle of this side's client configuration (nil: the system's).
func (s *Side) trustedCA() []byte {
	if s.Config == nil {
		return nil
	}
	if len(s.Config.CAData) > 0 {
		return s.Config.CAData
	}
	if s.Config.CAFile != "" {
		if b, err := os.ReadFile(s.Config.CAFile); err == nil {
			return b
		}
	}
	return nil
}

// WaitLiqoTenant waits until Liqo's controllers on the provider published, in the
// Tenant's status, a certificate for the consumer's key pub (and cluster ID consumerID)
// that is valid at validAt and chains to the CA published with it, a CA the kubeconfig
// reaching the provider trusts: all Liqo promises, since it writes no conditions.
func WaitLiqoTenant(ctx context.Context, p *Side, applied *authv1beta1.Tenant, pub crypto.PublicKey, consumerID string, validAt time.Time) (*authv1beta1.Tenant, error) {
	t, err := waitLiqoTenant(ctx, p, applied, pub, consumerID, validAt)
	if errors.Is(err, ErrTimeout) {
		err = explainLiqoWait(p, client.ObjectKeyFromObject(applied), consumerID, err)
	}
	return t, err
}

func waitLiqoTenant(ctx context.Context, p *Side, applied *authv1beta1.Tenant, pub crypto.PublicKey, consumerID string, validAt time.Time) (*authv1beta1.Tenant, error) {
	return waitObject(ctx, p, client.ObjectKeyFromObject(applied), applied, &authv1beta1.TenantList{}, "Liqo's controllers on the provider to issue the Tenant's certificate", "waiting for the Tenant status",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			if _, err := verifyPublished(t, pub, consumerID, validAt); err != nil {
				return false, fmt.Sprintf("%v (%s run there)", err, p.Controllers()), nil
			}
			if err := errors.Join(checkPublishedProxy(t), p.checkTrustedCA(t.Status.AuthParams.CA)); err != nil {
				return false, err.Error(), nil //nolint:nilerr // a CA the kubeconfig does not trust is not published by the provider (ErrNotPublished): the wait goes on with it as progress, as for this project's controllers
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
		// A transition time in the future (a status writer's, beyond a second of clock skew)
		// gets no grace: it would turn a refusal into a wait until the command's timeout.
		age := time.Since(c.LastTransitionTime.Time)
		if (c.Reason == string(authv1beta1.ReasonNonceMissing) || c.Reason == authv1beta1.ReasonTenantMisplaced) && age > -time.Second && age < refusalGrace {
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
