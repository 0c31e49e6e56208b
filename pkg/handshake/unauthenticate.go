package handshake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// ErrAccessNotRevoked means a permission of the consumer survived the teardown.
var ErrAccessNotRevoked = errors.New("access not revoked")

// Unauthenticate undoes the handshake on both sides, idempotently, then proves with
// SubjectAccessReviews on the provider that the consumer's user lost every permission
// its tenant role granted.
func (p *Pair) Unauthenticate(ctx context.Context, deleteNamespaces bool) error {
	c, pr := p.Consumer, p.Provider
	cTN, err := tenantNamespaceOrDefault(ctx, c, pr.ClusterID)
	if err != nil {
		return err
	}
	// The consumer's own credential, kept to prove the revocation with it when the
	// provider-side credentials may not ask SubjectAccessReviews (a peering user).
	cred, err := RevocationCredential(ctx, c, cTN, wire.IdentityName(pr.ClusterID), pr.ClusterID, pr, p.now())
	if err != nil {
		c.Report.Warn("%s: the revocation is proven without it", c.unscoped(err))
	}
	p.consumerIdentity = cred
	if err = RemoveIdentity(ctx, c, pr.ClusterID); err != nil {
		return err
	}
	pTN, err := tenantNamespaceOrDefault(ctx, pr, c.ClusterID)
	if err != nil {
		return err
	}
	if err := RemoveTenant(ctx, pr, c.ClusterID); err != nil {
		return err
	}
	if deleteNamespaces {
		if err := p.deleteTenantNamespaces(ctx, cTN, pTN); err != nil {
			return err
		}
	}
	return p.VerifyRevoked(ctx, pTN)
}

// RemoveIdentity removes, on consumer c, the control-plane Identity it holds on provider
// providerID, its kubeconfig and the signed nonce, and forgets the proxy pinned for that
// provider (cluster.ForgetProxy). The kubeconfig goes before the
// Identity that owns it: after, the garbage collector may have taken it already, and the
// command would say it found none.
func RemoveIdentity(ctx context.Context, c *Side, providerID string) error {
	cTN, err := tenantNamespaceOrDefault(ctx, c, providerID)
	if err != nil {
		return err
	}
	objs := []client.Object{
		&authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.IdentityName(providerID)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.KubeconfigSecretName(wire.IdentityName(providerID))}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: wire.SignedNonceSecretName}},
	}
	there := make([]bool, len(objs))
	for _, i := range []int{1, 0, 2} {
		var err error
		if there[i], err = deleteIfPresent(ctx, c.Client, objs[i]); err != nil {
			return c.Explain(err, "deleting the identity")
		}
	}
	var removed []string
	for i, name := range []string{"Identity", "kubeconfig", "signed nonce"} {
		if there[i] {
			removed = append(removed, name)
		}
	}
	removedOrNothing(c.Report, "Identity, kubeconfig or signed nonce", removed)
	if err := cluster.ForgetProxy(ctx, c.Client, c.Namespace, providerID); err != nil {
		return c.Explain(err, "forgetting the pinned proxy")
	}
	return nil
}

// RemoveTenant removes, on provider pr, the Tenant of consumer consumerID (its finalizer,
// handled by pr's controllers, removes its bindings and requests), then what it may have
// left: bindings, the nonce, the Renew and certificate requests.
func RemoveTenant(ctx context.Context, pr *Side, consumerID string) error {
	pTN, err := tenantNamespaceOrDefault(ctx, pr, consumerID)
	if err != nil {
		return err
	}
	t := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: consumerID}}
	existed := true
	if err := pr.Client.Delete(ctx, t); err != nil {
		if !isAbsent(err) {
			return pr.Explain(err, "deleting the Tenant")
		}
		existed = false
	}
	finalizer := "its finalizer is handled by " + pr.Controllers().String()
	if err := waitFor(ctx, pr.Client, client.ObjectKeyFromObject(t), &authv1beta1.TenantList{}, "the Tenant to be deleted",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			return t == nil, finalizer, nil
		}); err != nil {
		return pr.Explain(err, "deleting the Tenant")
	}
	if existed {
		pr.Report.Info("Tenant deleted")
	} else {
		pr.Report.Info("No Tenant to delete")
	}
	return removeTenantLeftovers(ctx, pr, pTN, consumerID)
}

// removeTenantLeftovers is RemoveTenant's second half, once the Tenant is gone: what its
// finalizer should have removed (bindings, the nonce, the Renew, and the certificate
// requests, with Liqo's own when Liqo's controllers run on pr), deleted if still there and
// reported.
func removeTenantLeftovers(ctx context.Context, pr *Side, pTN, consumerID string) error {
	leftovers := append(access.AccessObjects(pTN, consumerID, nil),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: wire.NonceSecretName}},
		&authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: wire.IdentityName(pr.ClusterID)}},
		&authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: wire.KeyRotationRenewName}})
	csrLabels := client.MatchingLabels{wire.RemoteClusterIDLabel: consumerID, wire.ManagedByLabel: wire.ManagedByValue}
	if pr.Controllers().Liqo() {
		// Liqo's provider keeps its bindings, the certificate it issued and its
		// CertificateSigningRequests, labelled with the consumer's cluster ID only.
		leftovers = append(leftovers, access.LiqoAccessObjects(pTN, consumerID)...)
		csrLabels = client.MatchingLabels{wire.RemoteClusterIDLabel: consumerID}
	}
	// With credentials that may not delete them (a peering user), what the Tenant's
	// finalizer removed is not checked again here: the proof below covers it.
	var removed []string
	for _, obj := range leftovers {
		there, err := deleteIfPresent(ctx, pr.Client, obj)
		if err != nil && !apierrors.IsForbidden(err) {
			return pr.Explain(err, "deleting what the Tenant left")
		}
		if there {
			removed = append(removed, leftoverName(obj))
		}
	}
	var csrs certificatesv1.CertificateSigningRequestList
	if err := pr.Client.List(ctx, &csrs, csrLabels); err != nil && !apierrors.IsForbidden(err) {
		return pr.Explain(err, "listing leftover CertificateSigningRequests")
	}
	for i := range csrs.Items {
		there, err := deleteIfPresent(ctx, pr.Client, &csrs.Items[i])
		if err != nil && !apierrors.IsForbidden(err) {
			return pr.Explain(err, "deleting leftover CertificateSigningRequests")
		}
		if there {
			removed = append(removed, "CertificateSigningRequest "+csrs.Items[i].Name)
		}
	}
	removedOrNothing(pr.Report, "binding, nonce or certificate request", removed)
	return nil
}

// leftoverName names an object RemoveTenant deleted, for its report.
func leftoverName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "nonce"
	case *authv1beta1.Renew:
		return "Renew"
	case *rbacv1.RoleBinding:
		return "RoleBinding " + obj.GetName()
	case *rbacv1.ClusterRoleBinding:
		return "ClusterRoleBinding " + obj.GetName()
	case *rbacv1.Role:
		return "Role " + obj.GetName()
	}
	return fmt.Sprintf("%T %s", obj, obj.GetName())
}

// namespaceGone bounds the wait for a deleted tenant namespace to be gone: Kubernetes
// removes its contents in the background, usually within seconds.
const namespaceGone = 30 * time.Second

// deleteTenantNamespaces deletes the tenant namespaces of the pair on both sides, forgets
// them in the records, and waits until they are gone: a namespace reported deleted must be
// gone, not still holding Secrets and bindings while it terminates. One still there after
// namespaceGone is reported as terminating.
func (p *Pair) deleteTenantNamespaces(ctx context.Context, cTN, pTN string) error {
	c, pr := p.Consumer, p.Provider
	sides := []struct {
		side     *Side
		ns, peer string
	}{{c, cTN, pr.ClusterID}, {pr, pTN, c.ClusterID}}
	for _, s := range sides {
		if err := deleteIgnoringAbsence(ctx, s.side.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
			return s.side.Explain(err, "deleting the tenant namespace")
		}
		if err := cluster.ForgetTenantNamespace(ctx, s.side.Client, s.side.Namespace, s.peer); err != nil {
			return s.side.Explain(err, "updating the tenant record")
		}
	}
	var eg errgroup.Group
	for _, s := range sides {
		eg.Go(func() error {
			wctx, cancel := context.WithTimeout(ctx, namespaceGone)
			defer cancel()
			err := waitFor(wctx, s.side.Client, client.ObjectKey{Name: s.ns}, &corev1.NamespaceList{}, "the namespace to be gone",
				func(ns *corev1.Namespace) (bool, string, error) { return ns == nil, "terminating", nil })
			switch {
			case err == nil:
				s.side.Report.Info("Tenant namespace %s deleted", s.ns)
			case errors.Is(err, ErrTimeout) && ctx.Err() == nil:
				s.side.Report.Warn("Tenant namespace %s is terminating: Kubernetes is still removing what it holds (kubectl get namespace %s shows when it is gone)", s.ns, s.ns)
			default:
				return s.side.Explain(err, "waiting for the tenant namespace to be deleted")
			}
			return nil
		})
	}
	return eg.Wait()
}

// VerifyRevoked proves on the provider that the consumer's user, with every group its
// certificate carries, may no longer do anything its tenant role granted, in namespace pTN
// or any other, and that no binding anywhere still names it; then it lists the
// certificates that stay cryptographically valid, which Kubernetes cannot revoke.
func (p *Pair) VerifyRevoked(ctx context.Context, pTN string) error {
	return VerifyRevoked(ctx, p.Provider, p.Consumer.ClusterID, pTN, p.consumerIdentity, p.now())
}

// VerifyRevoked is Pair.VerifyRevoked on provider pr alone, for consumer id: cred, when
// not nil, is the consumer's own credential, asked when pr's may not ask reviews.
func VerifyRevoked(ctx context.Context, pr *Side, id, pTN string, cred *rest.Config, now time.Time) error {
	rules := access.RevocationRules(id)
	// A key-bound certificate authenticates with its key group: the proof covers every key
	// group the tenant record lists (credentials that may not read it prove User <C> only,
	// and the consumer's own certificate below covers its own group).
	rec, err := cluster.GetTenantRecord(ctx, pr.Client, pr.Namespace, id)
	if err != nil && !apierrors.IsForbidden(err) {
		return pr.Explain(err, "reading the tenant record")
	}
	keyGroups := rec.ControlPlaneKeyGroups()
	prove := func(ctx context.Context) ([]string, error) {
		return revocation.ProveRevoked(ctx, pr.Client, pr.Client, id, pTN, rules, keyGroups...)
	}
	left, err := prove(ctx)
	if apierrors.IsForbidden(err) {
		prove = func(ctx context.Context) ([]string, error) {
			return revocation.ProveRevoked(ctx, pr.Client, emptyBindings{}, id, pTN, rules, keyGroups...)
		}
		left, err = prove(ctx)
		switch {
		case err == nil:
			pr.Report.Warn("These credentials may not list the bindings of every namespace: the revocation is verified with SubjectAccessReviews only")
		case apierrors.IsForbidden(err) && cred == nil:
			return pr.Errorf("%w: these credentials may ask no SubjectAccessReviews, and this cluster holds no certificate of its own on the provider to ask with (above, when one was passed over): the provider's administrator proves it with liqoctl unauthenticate --remote-cluster-id %s",
				ErrRevocationUnproven, id)
		case apierrors.IsForbidden(err):
			// Nor may they ask SubjectAccessReviews (a peering user): ask the API server,
			// with the consumer's own certificate, what that certificate may still do.
			pr.Report.Info("These credentials may not ask SubjectAccessReviews: the consumer's own certificate asks instead")
			prove = func(ctx context.Context) ([]string, error) { return selfAllowed(ctx, cred, pTN, rules) }
			left, err = prove(ctx)
		}
	}
	if err == nil && len(left) > 0 {
		// The bindings were deleted a moment ago: the authorizer may not have seen it yet.
		left, err = revocation.Settled(ctx, revocation.AuthorizerLag, prove)
	}
	if err != nil {
		return pr.Explain(err, "verifying the revocation")
	}
	if len(left) > 0 {
		return pr.Errorf("%w: user %q (groups %s) may still: %s. Remove those grants, then run liqoctl unauthenticate again",
			ErrAccessNotRevoked, id, strings.Join(append(revocation.RevocationGroups(keyGroups...), id), ", "), strings.Join(left, "; "))
	}
	// Qualified: a slice's proof that failed before is said apart, and is not this one.
	pr.Report.Info("Access revoked: verified for the identity of cluster %q", id)
	return ReportValidCertificates(ctx, pr, id, now)
}

// ReportValidCertificates lists, from provider pr's tenant record, the certificates issued
// to consumer id that have not expired.
func ReportValidCertificates(ctx context.Context, pr *Side, id string, now time.Time) error {
	rec, err := cluster.GetTenantRecord(ctx, pr.Client, pr.Namespace, id)
	if apierrors.IsForbidden(err) {
		pr.Report.Warn("Cannot read the tenant record of %q with these credentials: the certificates still valid are not listed", id)
		return nil
	}
	if err != nil {
		return pr.Explain(err, "reading the tenant record")
	}
	valid := rec.Valid(now)
	if len(valid) > 1 {
		// One line, not one per certificate: renewals leave many, all alike.
		serials, last := make([]string, 0, len(valid)), valid[0].NotAfter
		for _, c := range valid {
			serials = append(serials, c.Serial)
			if c.NotAfter.After(last) {
				last = c.NotAfter
			}
		}
		pr.Report.Warn("%d certificates issued to cluster ID %q stay cryptographically valid, the last until %s (serials %s): they authorize nothing now, but a new handshake (or slice of the same name) for that cluster ID would re-enable them until they expire; likely cause: each handshake, renewal and slice issues one, and Kubernetes cannot revoke them (liqoctl info lists each)",
			len(valid), id, last.UTC().Format(time.RFC3339), strings.Join(serials, ", "))
		return nil
	}
	for _, c := range valid {
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

// tenantNamespaceOrDefault is the tenant namespace of remoteID on s, or its default name
// (liqo-tenant-<remoteID>) when s has none recorded, names it ambiguously (only the
// default name is Liqo's own) or may not read where it is recorded (a peering user). Any
// other failure to look it up is returned: a removal or a listing in the default name
// while the recorded namespace is elsewhere would find nothing there and say so.
func tenantNamespaceOrDefault(ctx context.Context, s *Side, remoteID string) (string, error) {
	tn, err := s.TenantNamespace(ctx, remoteID)
	switch {
	case err == nil:
		return tn, nil
	case errors.Is(err, cluster.ErrTenantNamespaceNotFound), errors.Is(err, cluster.ErrAmbiguousTenantNamespace), apierrors.IsForbidden(err):
		return wire.TenantNamespaceName(remoteID), nil
	}
	return "", s.Explain(err, "looking up the tenant namespace of cluster "+remoteID)
}

func deleteIgnoringAbsence(ctx context.Context, c client.Client, obj client.Object) error {
	_, err := deleteIfPresent(ctx, c, obj)
	return err
}

// deleteIfPresent deletes obj and reports whether it was there.
func deleteIfPresent(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Delete(ctx, obj)
	switch {
	case err == nil:
		return true, nil
	case isAbsent(err):
		return false, nil
	}
	return false, err
}

// removedOrNothing is how a removal reports what it did: the names of what was there, or
// that nothing was left to remove (a re-run converges and says so).
func removedOrNothing(r Reporter, what string, removed []string) {
	if len(removed) == 0 {
		r.Info("No %s left: nothing to remove", what)
		return
	}
	last := removed[len(removed)-1]
	if len(removed) > 1 {
		last = strings.Join(removed[:len(removed)-1], ", ") + " and " + last
	}
	r.Info("%s removed", last)
}

// IdentityCredential is the client configuration with which the consumer proves what its
// control-plane identity on provider providerID may still do: the certificate of Identity
// ns/name, checked to be for this cluster's user (its cluster ID), a key of this cluster's, the API server and CA that Identity recorded and the proxy
// this cluster pinned (the Identity's only where no tenant record of this project's is),
// with the CA the tenant record pinned for that provider (or, without a pin, one the
// kubeconfig reaching the provider trusts: remote, nil when there is none). It never reads
// the kubeconfig Secret, whose server anyone allowed to write Secrets there may point
// elsewhere. nil, with no error, when there is no Identity or its certificate expired (it
// authorizes nothing); an error when it cannot be trusted for a proof.
//
// Where no proxy is pinned and the Identity names one (a peering older than the pin, or an
// Identity writer's), it refuses with the pin advice: verify, which asks it, then says how
// the consumer reaches the provider is not pinned rather than pass by another way.
func IdentityCredential(ctx context.Context, c *Side, ns, name, providerID string, remote *Side, now time.Time) (*rest.Config, error) {
	cfg, _, err := identityCredential(ctx, c, ns, name, providerID, remote, now, false)
	return cfg, err
}

// RevocationCredential is IdentityCredential for the commands that give an access up
// (unauthenticate, leave; a slice's deletion has SliceRevocationCredential): where no proxy is pinned and the Identity
// names one, it takes none, as this cluster's controllers do
// (cluster.TenantRecord.CheckIdentityProxy), and warns that it did. An Identity writer's
// proxy neither carries the proof nor stops the revocation; a provider reached only
// through a proxy then fails the proof, after the access is given up.
func RevocationCredential(ctx context.Context, c *Side, ns, name, providerID string, remote *Side, now time.Time) (*rest.Config, error) {
	cfg, skipped, err := identityCredential(ctx, c, ns, name, providerID, remote, now, true)
	if err == nil {
		c.warnSkippedProxy(fmt.Sprintf("Identity %s/%s", ns, name), skipped, providerID)
	}
	return cfg, err
}

// warnSkippedProxy says, when skipped is not "", that the credential read from what
// reaches provider providerID directly and not through skipped, the proxy it named.
func (c *Side) warnSkippedProxy(what, skipped, providerID string) {
	if skipped != "" {
		c.Report.Warn("%s names %s, and this cluster pinned no proxy for provider %q: its certificate reaches the provider directly, as this cluster's controllers do while none is pinned (a proxy is taken only once a handshake pinned it)",
			what, cluster.DescribeProxy(skipped), providerID)
	}
}

// identityCredential is IdentityCredential; with direct, an Identity that names a proxy
// where none is pinned gives the credential with none, and skipped is that proxy.
func identityCredential(ctx context.Context, c *Side, ns, name, providerID string, remote *Side, now time.Time, direct bool) (*rest.Config, string, error) {
	var id authv1beta1.Identity
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &id); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", nil
		}
		return nil, "", c.Explain(err, "reading Identity "+name)
	}
	if err := c.identified(ctx); err != nil {
		return nil, "", err
	}
	cfg, skipped, _, err := c.credential(ctx, fmt.Sprintf("Identity %s/%s", ns, name), &id.Spec.AuthParams, c.ClusterID, providerID, remote, now, direct)
	return cfg, skipped, err
}

// credential is the client configuration of the certificate ap holds (what names where it
// was read, for the errors), checked to be for user (its common name: an Identity writer
// may put there another certificate of this cluster, e.g. a slice's, for which a proof
// would say nothing of the access it means), for a key of this cluster's (the one it
// takes), and issued by ap's CA, the one pinned for provider providerID. nil, with no error, when ap holds
// no certificate or one that expired (it authorizes nothing); held says ap held one valid
// now, whatever else the checks found.
func (c *Side) credential(ctx context.Context, what string, ap *authv1beta1.AuthParams, user, providerID string, remote *Side, now time.Time, direct bool) (cfg *rest.Config, skipped string, held bool, err error) {
	if !ap.HasCertificate() {
		return nil, "", false, nil
	}
	cert, err := authn.ParseCertificate(ap.SignedCRT)
	if err != nil {
		return nil, "", true, fmt.Errorf("%s%s: %w", c.prefix(), what, err)
	}
	if !now.Before(cert.NotAfter) {
		return nil, "", false, nil
	}
	if cert.Subject.CommonName != user {
		return nil, "", true, fmt.Errorf("%s%s holds a certificate for user %q, not %q: it proves nothing of that identity", c.prefix(), what, cert.Subject.CommonName, user)
	}
	ks, err := c.ClusterKeys(ctx)
	if err != nil {
		return nil, "", true, err
	}
	key := ks.Holding(cert.PublicKey)
	if key == nil {
		return nil, "", true, fmt.Errorf("%s%s holds a certificate for another key than this cluster's: it proves nothing", c.prefix(), what)
	}
	// Issued by the CA checked below, not only named beside it: anyone may sign a
	// certificate for this cluster's public key, which the provider answers 401, and a
	// proof reads 401 as "may do nothing".
	if _, verifyErr := authn.VerifyCertificate(ap.SignedCRT, ap.CA, key.Public(), user, now); verifyErr != nil {
		return nil, "", true, fmt.Errorf("%s%s holds a certificate its CA did not issue: it proves nothing: %w", c.prefix(), what, verifyErr)
	}
	rec, checkIdentityCAErr := c.checkIdentityCA(ctx, providerID, ap.CA, remote)
	if checkIdentityCAErr != nil {
		return nil, "", true, fmt.Errorf("%s%s cannot prove the revocation: %w", c.prefix(), what, checkIdentityCAErr)
	}
	proxy, skipped, err := credentialProxy(rec, c.Namespace, providerID, ptr.Deref(ap.ProxyURL, ""), direct)
	if err != nil {
		return nil, "", true, fmt.Errorf("%s%s cannot prove the revocation: %w", c.prefix(), what, err)
	}
	keyPEM, err := authn.MarshalPrivateKey(key)
	if err != nil {
		return nil, "", true, err
	}
	cfg = &rest.Config{Host: ap.APIServer, TLSClientConfig: rest.TLSClientConfig{CAData: ap.CA, CertData: ap.SignedCRT, KeyData: keyPEM}}
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil {
			return nil, "", true, fmt.Errorf("%s%s: proxy URL: %w", c.prefix(), what, err)
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	return cfg, skipped, true, nil
}

// credentialProxy is the proxy through which a credential of an Identity that names proxy
// reaches the provider: the one this cluster pinned in rec (none when none is), whoever
// wrote the Identity; only a consumer that keeps no record of this project's (Liqo's)
// takes the Identity's. Where none is pinned and the Identity names a proxy (a peering
// older than the pin, or an Identity writer's), no way to the provider is known for sure:
// an error, or with direct none, and skipped is the proxy not taken.
func credentialProxy(rec *cluster.TenantRecord, liqoNS, providerID, proxy string, direct bool) (use, skipped string, err error) {
	switch {
	case rec == nil:
		return proxy, "", nil
	case rec.ProxyURL == nil && proxy != "" && !direct:
		return "", "", rec.CheckIdentityProxy(liqoNS, providerID, proxy)
	case rec.ProxyURL == nil && proxy != "":
		return "", proxy, nil
	}
	return rec.PinnedProxy(), "", nil
}

// checkIdentityCA verifies that ca, an Identity's CA for provider providerID, is the one
// the tenant record pinned or, with no pin, shares a certificate with the CA the kubeconfig
// reaching the provider (remote, may be nil) trusts. It returns the record it read (nil:
// there is none).
func (c *Side) checkIdentityCA(ctx context.Context, providerID string, ca []byte, remote *Side) (*cluster.TenantRecord, error) {
	fp, err := authn.CAFingerprint(ca)
	if err != nil {
		return nil, err
	}
	rec, err := cluster.GetTenantRecord(ctx, c.Client, c.Namespace, providerID)
	if err != nil {
		return nil, err
	}
	switch {
	case rec != nil && rec.CAFingerprint != "":
		if fp != rec.CAFingerprint {
			return nil, fmt.Errorf("its CA %s is not the %s this cluster pinned for provider %q", fp, rec.CAFingerprint, providerID)
		}
		return rec, nil
	case remote != nil && len(remote.trustedCA()) > 0:
		if !authn.SharesCertificate(remote.trustedCA(), ca) {
			return nil, fmt.Errorf("its CA %s is not one the kubeconfig reaching the provider trusts", fp)
		}
		return rec, nil
	}
	return nil, fmt.Errorf("no CA is pinned for provider %q to check its CA %s against", providerID, fp)
}

// selfAllowed asks, with SelfSubjectAccessReviews made with cfg's certificate, which of the
// actions rules grant it may still perform in namespace ns and in every namespace. A
// certificate the API server no longer accepts (expired) may do nothing.
func selfAllowed(ctx context.Context, cfg *rest.Config, ns string, rules []rbacv1.PolicyRule) ([]string, error) {
	left, err := selfAllowedIn(ctx, cfg, []string{ns}, rules)
	return inWords(left), err
}

// stillAllowed is an action a SelfSubjectAccessReview found a certificate may still
// perform, in namespace ("" for every namespace).
type stillAllowed struct {
	namespace string
	action    authorizationv1.ResourceAttributes
}

// String words the action as the proofs report it.
func (a stillAllowed) String() string {
	return fmt.Sprintf("%s %s/%s in %q", a.action.Verb, a.action.Group, a.action.Resource, a.namespace)
}

// inWords words each action of left.
func inWords(left []stillAllowed) []string {
	if left == nil {
		return nil
	}
	out := make([]string, 0, len(left))
	for _, a := range left {
		out = append(out, a.String())
	}
	return out
}

// selfAllowedIn is selfAllowed in each namespace of namespaces (and in every namespace),
// each action left with the namespace it is allowed in.
func selfAllowedIn(ctx context.Context, cfg *rest.Config, namespaces []string, rules []rbacv1.PolicyRule) ([]stillAllowed, error) {
	// A short burst of reviews: not throttled by client-go's default 5 requests/s.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var left []stillAllowed
	unauthorized := false
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for _, where := range slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(namespaces), "")))) {
		for _, a := range revocation.Actions(rules, where) {
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
					left = append(left, stillAllowed{namespace: where, action: a})
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
		// The server is the provider's (its TLS certificate chains to the CA pinned for
		// it, see IdentityCredential), and it no longer accepts the certificate: it may do
		// nothing.
		return nil, nil
	}
	slices.SortFunc(left, func(a, b stillAllowed) int { return strings.Compare(a.String(), b.String()) })
	return left, nil
}

// ProviderNamespace is c's tenant namespace on provider providerID: the one a handshake
// pinned in c's tenant record, else named (an Identity's spec.namespace, "" for none), else
// the protocol's. An Identity's spec.namespace is its writers' (helper-39's F7): where a
// handshake pinned another, a removal or a proof asked there would find nothing and say
// so, while the Tenant or the slice's copy keeps its grant where the pin says.
func ProviderNamespace(ctx context.Context, c *Side, providerID, named string) (string, error) {
	rec, err := cluster.GetTenantRecord(ctx, c.Client, c.Namespace, providerID)
	if err != nil {
		// Forbidden too: read as "none pinned", the Identity writer's namespace would do.
		return "", c.Explain(err, "reading the tenant record of provider "+providerID)
	}
	if ns := rec.ProviderNamespaceOr(named); ns != "" {
		return ns, nil
	}
	return wire.TenantNamespaceName(c.ClusterID), nil
}
