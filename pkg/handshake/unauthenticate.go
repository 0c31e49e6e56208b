package handshake

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ErrAccessNotRevoked means a permission of the consumer survived the teardown.
var ErrAccessNotRevoked = errors.New("access not revoked")

// Unauthenticate undoes the handshake on both sides, idempotently, then proves with
// SubjectAccessReviews on the provider that the consumer's user lost every permission
// its tenant role granted.
func (p *Pair) Unauthenticate(ctx context.Context, deleteNamespaces bool) error {
	c, pr := p.Consumer, p.Provider
	cTN := tenantNamespaceOrDefault(ctx, c, pr.ClusterID)
	// The consumer's own credential, kept to prove the revocation with it when the
	// provider-side credentials may not ask SubjectAccessReviews (a peering user).
	p.consumerIdentity = consumerIdentity(ctx, c, cTN, pr.ClusterID)
	for _, obj := range []client.Object{
		&authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: cluster.IdentityName(pr.ClusterID)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: cluster.KubeconfigSecretName(cluster.IdentityName(pr.ClusterID))}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: cluster.SignedNonceSecretName}},
	} {
		if err := deleteIgnoringAbsence(ctx, c.Client, obj); err != nil {
			return c.Explain(err, "deleting the identity")
		}
	}
	c.Report.Info("Identity, kubeconfig and signed nonce removed")

	pTN := tenantNamespaceOrDefault(ctx, pr, c.ClusterID)
	t := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: c.ClusterID}}
	if err := deleteIgnoringAbsence(ctx, pr.Client, t); err != nil {
		return pr.Explain(err, "deleting the Tenant")
	}
	finalizer := "its finalizer is handled by liqo-auth-manager (or liqoctl's in-process controllers)"
	if pr.Liqo != "" {
		finalizer = "its finalizer is handled by Liqo's controllers (" + pr.Liqo + ")"
	}
	if err := waitFor(ctx, pr.Client, client.ObjectKeyFromObject(t), &authv1beta1.TenantList{}, "the Tenant to be deleted",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			return t == nil, finalizer, nil
		}); err != nil {
		return pr.Explain(err, "deleting the Tenant")
	}
	pr.Report.Info("Tenant deleted")
	leftovers := append(cluster.AccessObjects(pTN, c.ClusterID),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: cluster.NonceSecretName}},
		&authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: cluster.IdentityName(pr.ClusterID)}})
	csrLabels := client.MatchingLabels{cluster.RemoteClusterIDLabel: c.ClusterID, cluster.ManagedByLabel: cluster.ManagedByValue}
	if pr.Liqo != "" {
		// Liqo's provider keeps its bindings, the certificate it issued and its
		// CertificateSigningRequests, labelled with the consumer's cluster ID only.
		leftovers = append(leftovers, cluster.LiqoAccessObjects(pTN, c.ClusterID)...)
		csrLabels = client.MatchingLabels{cluster.RemoteClusterIDLabel: c.ClusterID}
	}
	// With credentials that may not delete them (a peering user), what the Tenant's
	// finalizer removed is not checked again here: the proof below covers it.
	for _, obj := range leftovers {
		if err := deleteIgnoringAbsence(ctx, pr.Client, obj); err != nil && !apierrors.IsForbidden(err) {
			return pr.Explain(err, "deleting what the Tenant left")
		}
	}
	if err := pr.Client.DeleteAllOf(ctx, &certificatesv1.CertificateSigningRequest{}, csrLabels); err != nil && !apierrors.IsForbidden(err) {
		return pr.Explain(err, "deleting leftover CertificateSigningRequests")
	}
	pr.Report.Info("Bindings, nonce and certificate requests removed")

	if deleteNamespaces {
		for _, s := range []struct {
			side *Side
			ns   string
		}{{c, cTN}, {pr, pTN}} {
			if err := deleteIgnoringAbsence(ctx, s.side.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
				return s.side.Explain(err, "deleting the tenant namespace")
			}
			remote := pr.ClusterID
			if s.side == pr {
				remote = c.ClusterID
			}
			if err := cluster.ForgetTenantNamespace(ctx, s.side.Client, s.side.Namespace, remote); err != nil {
				return s.side.Explain(err, "updating the tenant record")
			}
			s.side.Report.Info("Tenant namespace %s deleted", s.ns)
		}
	}
	return p.VerifyRevoked(ctx, pTN)
}

// VerifyRevoked proves on the provider that the consumer's user, with every group its
// certificate carries, may no longer do anything its tenant role granted, in namespace pTN
// or any other, and that no binding anywhere still names it; then it lists the
// certificates that stay cryptographically valid, which Kubernetes cannot revoke.
func (p *Pair) VerifyRevoked(ctx context.Context, pTN string) error {
	pr, id := p.Provider, p.Consumer.ClusterID
	rules := cluster.RevocationRules(id)
	left, err := cluster.ProveRevoked(ctx, pr.Client, pr.Client, id, pTN, rules)
	if apierrors.IsForbidden(err) {
		left, err = cluster.ProveRevoked(ctx, pr.Client, emptyBindings{}, id, pTN, rules)
		switch {
		case err == nil:
			pr.Report.Warn("These credentials may not list the bindings of every namespace: the revocation is verified with SubjectAccessReviews only")
		case apierrors.IsForbidden(err) && p.consumerIdentity != nil:
			// Nor may they ask SubjectAccessReviews (a peering user): ask the API server,
			// with the consumer's own certificate, what that certificate may still do.
			pr.Report.Info("These credentials may not ask SubjectAccessReviews: the consumer's own certificate asks instead")
			left, err = selfAllowed(ctx, p.consumerIdentity, pTN, rules)
		}
	}
	if err != nil {
		return pr.Explain(err, "verifying the revocation")
	}
	if len(left) > 0 {
		return fmt.Errorf("(remote) %w: user %q (groups %s) may still: %s. Remove those grants, then run liqoctl unauthenticate again",
			ErrAccessNotRevoked, id, strings.Join(append(cluster.RevocationGroups(), id), ", "), strings.Join(left, "; "))
	}
	pr.Report.Info("Access revoked: verified")
	return p.ReportValidCertificates(ctx)
}

// ReportValidCertificates lists, from the provider's tenant record, the certificates issued
// to the consumer that have not expired.
func (p *Pair) ReportValidCertificates(ctx context.Context) error {
	pr, id := p.Provider, p.Consumer.ClusterID
	rec, err := cluster.GetTenantRecord(ctx, pr.Client, pr.Namespace, id)
	if apierrors.IsForbidden(err) {
		pr.Report.Warn("Cannot read the tenant record of %q with these credentials: the certificates still valid are not listed", id)
		return nil
	}
	if err != nil {
		return pr.Explain(err, "reading the tenant record")
	}
	for _, c := range rec.Valid(p.now()) {
		if c.Slice != "" {
			pr.Report.Warn("Certificate %s of ResourceSlice %s stays cryptographically valid until %s: it authorizes nothing now, but a new slice of that name for cluster ID %q would re-enable it until it expires",
				c.Serial, c.Slice, c.NotAfter.UTC().Format(time.RFC3339), id)
			continue
		}
		pr.Report.Warn("Certificate %s (key %s) stays cryptographically valid until %s: it authorizes nothing now, but a new handshake for cluster ID %q would re-enable it until it expires",
			c.Serial, c.KeyFingerprint, c.NotAfter.UTC().Format(time.RFC3339), id)
	}
	return nil
}

// emptyBindings reads no bindings: for credentials that may not list them.
type emptyBindings struct{ client.Reader }

func (emptyBindings) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func tenantNamespaceOrDefault(ctx context.Context, s *Side, remoteID string) string {
	if tn, err := s.TenantNamespace(ctx, remoteID); err == nil {
		return tn
	}
	return cluster.TenantNamespaceName(remoteID)
}

func deleteIgnoringAbsence(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Delete(ctx, obj)
	if err == nil || isAbsent(err) {
		return nil
	}
	return err
}

// consumerIdentity returns the client configuration of the consumer's control-plane
// kubeconfig for provider providerID, nil when there is none (or it is not one liqo-auth
// wrote: ReadKubeconfig refuses anything but embedded certificate data).
func consumerIdentity(ctx context.Context, c *Side, cTN, providerID string) *rest.Config {
	var s corev1.Secret
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: cluster.KubeconfigSecretName(cluster.IdentityName(providerID))}, &s); err != nil {
		return nil
	}
	info, err := authn.ReadKubeconfig(s.Data[cluster.KubeconfigField])
	if err != nil {
		return nil
	}
	return &rest.Config{Host: info.Server, TLSClientConfig: rest.TLSClientConfig{CAData: info.CA, CertData: info.CertPEM, KeyData: info.KeyPEM}}
}

// selfAllowed asks, with SelfSubjectAccessReviews made with cfg's certificate, which of the
// actions rules grant it may still perform in namespace ns and in every namespace. A
// certificate the API server no longer accepts (expired) may do nothing.
func selfAllowed(ctx context.Context, cfg *rest.Config, ns string, rules []rbacv1.PolicyRule) ([]string, error) {
	// A short burst of reviews: not throttled by client-go's default 5 requests/s.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var left []string
	unauthorized := false
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for _, where := range []string{ns, ""} {
		for _, a := range cluster.Actions(rules, where) {
			eg.Go(func() error {
				review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
				if err := c.Create(ctx, review); err != nil {
					if apierrors.IsUnauthorized(err) {
						mu.Lock()
						unauthorized = true
						mu.Unlock()
						return nil
					}
					return fmt.Errorf("asking with the consumer's certificate: %w", err)
				}
				if review.Status.Allowed {
					mu.Lock()
					left = append(left, fmt.Sprintf("%s %s/%s in %q", a.Verb, a.Group, a.Resource, where))
					mu.Unlock()
				}
				return nil
			})
		}
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if unauthorized {
		// A certificate the API server no longer accepts (expired) may do nothing.
		return nil, nil
	}
	sort.Strings(left)
	return left, nil
}
