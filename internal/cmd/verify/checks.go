package verify

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Report is the output of liqoctl verify (-o json|yaml): one entry per direction checked.
// Lists are never null; fields hold values, not sentences, except Detail.
type Report struct {
	Peers []Peer `json:"peers"`
}

// Peer is the verification of consumer's identity on provider.
type Peer struct {
	Consumer string `json:"consumer"`
	Provider string `json:"provider"`
	// Expires is when the certificate expires and RenewsAt when it is due for renewal
	// (two thirds of its lifetime); absent when there is no certificate.
	Expires  *time.Time `json:"expires,omitempty"`
	RenewsAt *time.Time `json:"renewsAt,omitempty"`
	// ClockSkewSeconds is the provider's clock minus the consumer's (±1 s), when measured.
	ClockSkewSeconds *float64 `json:"clockSkewSeconds,omitempty"`
	Checks           []Check  `json:"checks"`
}

// Check is one property verified.
type Check struct {
	// Name is one of identity, certificate-key, ca-pin, expiry, authentication,
	// permissions, cluster-wide, every-namespace, clock-skew, kubeconfig.
	Name string `json:"name"`
	// Result is pass, fail or skip.
	Result string `json:"result"`
	// Detail says what was found (free text, for people).
	Detail string `json:"detail"`
	// summary is Detail in one line, for the table, when Detail lists many items.
	summary string
}

// Results of a check.
const (
	ResultPass = "pass"
	ResultFail = "fail"
	ResultSkip = "skip"
)

// verifier checks identities.
type verifier struct {
	now     func() time.Time
	maxSkew time.Duration
}

// providers are the providers s holds a control-plane Identity on, read only in the
// designated tenant namespace of each provider; ignored counts the Identities elsewhere,
// which whoever may write Identities in any namespace can create.
func (v verifier) providers(ctx context.Context, s *handshake.Side) (out []string, ignored int, err error) {
	designated, err := s.Controllers().TenantNamespaces(ctx, s)
	if err != nil {
		return nil, 0, s.Explain(err, "reading the tenant namespaces")
	}
	var ids authv1beta1.IdentityList
	if err := s.Client.List(ctx, &ids); err != nil {
		return nil, 0, s.Explain(err, "listing Identities")
	}
	for _, id := range ids.Items {
		remote := string(id.Spec.ClusterID)
		if !designated.Holds(id.Namespace, remote) {
			ignored++
			continue
		}
		if id.Spec.Type == authv1beta1.ControlPlaneIdentityType && id.Name == wire.IdentityName(remote) && !slices.Contains(out, remote) {
			out = append(out, remote)
		}
	}
	sort.Strings(out)
	return out, ignored, nil
}

// peer collects the checks of one direction.
type peer struct{ *Peer }

func (p peer) add(name, result, format string, args ...any) {
	p.Checks = append(p.Checks, Check{Name: name, Result: result, Detail: fmt.Sprintf(format, args...)})
}

// summarize gives the last check a one-line summary for the table (the detail, in -o
// json|yaml, keeps every item).
func (p peer) summarize(s string) { p.Checks[len(p.Checks)-1].summary = s }

// verify checks the identity of consumer c on provider providerID; remote, when given, is
// the provider reached with its own kubeconfig (for the CA it trusts and whose controllers
// run there).
func (v verifier) verify(ctx context.Context, c *handshake.Side, providerID string, remote *handshake.Side) Peer {
	out := Peer{Consumer: c.ClusterID, Provider: providerID, Checks: []Check{}}
	p := peer{&out}
	now := v.now()
	tn, err := c.TenantNamespace(ctx, providerID)
	if err != nil {
		p.add("identity", ResultFail, "no tenant namespace for provider %s: %v", providerID, err)
		return out
	}
	var id authv1beta1.Identity
	if getErr := c.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.IdentityName(providerID)}, &id); getErr != nil {
		p.add("identity", ResultFail, "Identity %s/%s: %v", tn, wire.IdentityName(providerID), getErr)
		return out
	}
	cert, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
	if err != nil {
		p.add("identity", ResultFail, "Identity %s/%s holds no certificate: %v", tn, id.Name, err)
		return out
	}
	p.add("identity", ResultPass, "Identity %s/%s, certificate %s for %s", tn, id.Name, cert.SerialNumber.Text(16), cert.Subject.CommonName)
	v.kubeconfig(ctx, p, c, &id)
	expires, renews := cert.NotAfter.UTC(), cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore)*2/3).UTC()
	out.Expires, out.RenewsAt = &expires, &renews

	checkCertificateKey(ctx, p, c, cert)
	checkCAPin(ctx, p, c, providerID, &id)
	checkExpiry(p, expires, renews, now)
	if !now.Before(expires) {
		return out
	}

	var trusted *handshake.Side
	if remote != nil && remote.ClusterID == providerID {
		trusted = remote
	}
	cfg, err := handshake.IdentityCredential(ctx, c, tn, id.Name, providerID, trusted, now)
	if err != nil || cfg == nil {
		p.add("authentication", ResultFail, "the identity cannot be used: %v", err)
		return out
	}
	cfg.Timeout = 10 * time.Second
	ic, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		p.add("authentication", ResultFail, "%v", err)
		return out
	}
	v.authentication(ctx, p, ic, c.ClusterID, cfg.Host)
	identityTN, err := handshake.ProviderNamespace(ctx, c, providerID, ptr.Deref(id.Spec.Namespace, ""))
	if err != nil {
		p.add("permissions", ResultFail, "%v", err)
		return out
	}
	v.permissions(ctx, p, ic, c.ClusterID, identityTN, trusted != nil && trusted.Controllers().Liqo())
	v.everyNamespace(ctx, p, trusted, c.ClusterID, identityTN)
	v.clockSkew(ctx, p, c, cfg)
	return out
}

// checkCertificateKey is the "certificate-key" check of verify: the Identity's
// certificate is for this cluster's key. Around a key rotation (liqoctl rotate key) it
// may be for the staged next key (the provider moved) or for the previous one (it has not
// yet): both pass, saying so; a key the cluster does not hold fails.
func checkCertificateKey(ctx context.Context, p peer, c *handshake.Side, cert *x509.Certificate) {
	ks, err := c.ClusterKeys(ctx)
	bound := ""
	if authn.CertificateKeyGroup(cert) != "" {
		bound = ", bound to its key (group " + authn.CertificateKeyGroup(cert) + ")"
	}
	switch {
	case err != nil:
		p.add("certificate-key", ResultFail, "reading the cluster key: %v", err)
	case authn.PublicKeysEqual(cert.PublicKey, ks.Current.Public()) && !ks.Rotating():
		p.add("certificate-key", ResultPass, "the certificate is for this cluster's key%s", bound)
	case authn.PublicKeysEqual(cert.PublicKey, ks.Current.Public()):
		p.add("certificate-key", ResultPass, "the certificate is for this cluster's current key%s; a key rotation is under way (liqoctl rotate key resumes it, liqoctl info shows each peer)", bound)
	case ks.Next != nil && authn.PublicKeysEqual(cert.PublicKey, ks.Next.Public()):
		p.add("certificate-key", ResultPass, "the certificate is for this cluster's next key%s: this provider moved, the rotation has not switched yet (liqoctl rotate key resumes it)", bound)
	case ks.Previous != nil && authn.PublicKeysEqual(cert.PublicKey, ks.Previous.Public()):
		p.add("certificate-key", ResultPass, "the certificate is for this cluster's previous key: this provider has not moved to the current key yet (liqoctl rotate key resumes the rotation, liqoctl info shows why)")
	default:
		p.add("certificate-key", ResultFail, "the certificate is for another key than this cluster's")
	}
}

// checkCAPin is the "ca-pin" check of verify: the Identity's CA is the one this cluster
// pinned for the provider (skipped when none is pinned).
func checkCAPin(ctx context.Context, p peer, c *handshake.Side, providerID string, id *authv1beta1.Identity) {
	fp, err := authn.CAFingerprint(id.Spec.AuthParams.CA)
	rec, recErr := c.Controllers().Record(ctx, c, providerID)
	switch {
	case err != nil:
		p.add("ca-pin", ResultFail, "the Identity's CA: %v", err)
	case recErr != nil:
		p.add("ca-pin", ResultFail, "reading the tenant record of %s: %v", providerID, recErr)
	case rec == nil || rec.CAFingerprint == "":
		p.add("ca-pin", ResultSkip, "no CA pinned for %s on this cluster (Liqo's controllers, or an older liqo-auth)", providerID)
	case rec.CAFingerprint != fp:
		p.add("ca-pin", ResultFail, "the Identity's CA %s is not the CA pinned for %s (%s)", fp, providerID, rec.CAFingerprint)
	default:
		p.add("ca-pin", ResultPass, "CA %s is the one pinned", fp)
	}
}

// checkExpiry is the "expiry" check of verify: the certificate is valid at now, and not
// long overdue for renewal (half the time left after renews, which would mean nobody
// renews it).
func checkExpiry(p peer, expires, renews, now time.Time) {
	switch left := expires.Sub(now); {
	case left <= 0:
		p.add("expiry", ResultFail, "expired at %s", expires.Format(time.RFC3339))
	case now.After(renews.Add(left / 2)):
		p.add("expiry", ResultFail, "expires at %s and was due for renewal at %s: is the provider's manager running?", expires.Format(time.RFC3339), renews.Format(time.RFC3339))
	default:
		p.add("expiry", ResultPass, "expires at %s, renewal due at %s", expires.Format(time.RFC3339), renews.Format(time.RFC3339))
	}
}

// authentication asks the provider who the identity is.
func (v verifier) authentication(ctx context.Context, p peer, ic client.Client, consumerID, host string) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := ic.Create(ctx, review); err != nil {
		p.add("authentication", ResultFail, "the provider %s did not answer with this identity: %v", host, err)
		return
	}
	u := review.Status.UserInfo
	if u.Username != consumerID || !slices.Contains(u.Groups, wire.UserGroup) {
		p.add("authentication", ResultFail, "the provider %s authenticates this identity as %q in groups %v, not %q in %q", host, u.Username, u.Groups, consumerID, wire.UserGroup)
		return
	}
	p.add("authentication", ResultPass, "%s authenticates it as %q in group %q", host, u.Username, wire.UserGroup)
}

// permissions compares what the identity may do in its tenant namespace with the tenant
// role, and checks that it may do nothing elsewhere.
func (v verifier) permissions(ctx context.Context, p peer, ic client.Client, consumerID, tn string, liqo bool) {
	got, err := rulesIn(ctx, ic, tn)
	if err != nil {
		p.add("permissions", ResultFail, "SelfSubjectRulesReview in %s: %v", tn, err)
		return
	}
	if liqo {
		p.add("permissions", ResultSkip, "Liqo's controllers run on the provider: its role is Liqo's (%d permissions in %s)", len(got), tn)
	} else {
		want := expand(access.TenantRules(consumerID))
		missing, extra := diff(want, got), diff(got, want)
		if len(missing)+len(extra) == 0 {
			p.add("permissions", ResultPass, "exactly the tenant role's %d permissions in %s", len(want), tn)
		} else {
			p.add("permissions", ResultFail, "in %s, missing %s; extra %s", tn, list(missing), list(extra))
			p.summarize(permissionsSummary(tn, len(want), missing, extra))
		}
	}
	other, err := rulesIn(ctx, ic, metav1.NamespaceDefault)
	switch {
	case err != nil:
		p.add("cluster-wide", ResultFail, "SelfSubjectRulesReview in %s: %v", metav1.NamespaceDefault, err)
	case len(other) > 0:
		p.add("cluster-wide", ResultFail, "it may act outside its tenant namespace: %s", list(other))
		if len(other) > summaryItems {
			p.summarize(fmt.Sprintf("%d permissions outside %s (%s, … -o json lists them): likely a ClusterRoleBinding naming user %q or group %q", len(other), tn, strings.Join(other[:summaryItems], ", "), consumerID, wire.UserGroup))
		}
	default:
		p.add("cluster-wide", ResultPass, "no permission granted in every namespace (SelfSubjectRulesReview in %s; other namespaces: %s)", metav1.NamespaceDefault, CheckEveryNamespace)
	}
}

// rulesIn are the identity's resource permissions in ns, as group/resource[/name]:verb,
// without the self-reviews every authenticated user has.
func rulesIn(ctx context.Context, ic client.Client, ns string) ([]string, error) {
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}
	if err := ic.Create(ctx, review); err != nil {
		return nil, err
	}
	var rules []string
	for _, r := range review.Status.ResourceRules {
		for _, t := range expandOne(r.APIGroups, r.Resources, r.ResourceNames, r.Verbs) {
			if !selfReview(t) {
				rules = append(rules, t)
			}
		}
	}
	sort.Strings(rules)
	return slices.Compact(rules), nil
}

func selfReview(t string) bool {
	for _, s := range []string{"authorization.k8s.io/selfsubjectaccessreviews:", "authorization.k8s.io/selfsubjectrulesreviews:", "authentication.k8s.io/selfsubjectreviews:"} {
		if strings.HasPrefix(t, s) {
			return true
		}
	}
	return false
}

func expand(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, expandOne(r.APIGroups, r.Resources, r.ResourceNames, r.Verbs)...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func expandOne(groups, resources, names, verbs []string) []string {
	var out []string
	if len(names) == 0 {
		names = []string{""}
	}
	for _, g := range groups {
		for _, r := range resources {
			for _, n := range names {
				for _, v := range verbs {
					t := g + "/" + r
					if n != "" {
						t += "/" + n
					}
					out = append(out, t+":"+v)
				}
			}
		}
	}
	return out
}

// diff is what a holds and b does not.
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func list(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// clockSkew compares the Date of each API server's answer with this machine's clock.
func (v verifier) clockSkew(ctx context.Context, p peer, c *handshake.Side, providerCfg *rest.Config) {
	local, err := serverOffset(ctx, c.Config)
	if err != nil {
		p.add("clock-skew", ResultSkip, "the consumer's clock: %v", err)
		return
	}
	remote, err := serverOffset(ctx, providerCfg)
	if err != nil {
		p.add("clock-skew", ResultSkip, "the provider's clock: %v", err)
		return
	}
	skew := remote - local
	s := skew.Seconds()
	p.ClockSkewSeconds = &s
	if skew.Abs() > v.maxSkew+time.Second {
		p.add("clock-skew", ResultFail, "the provider's clock is %s from the consumer's (more than %s): certificates may be refused as not yet valid or expired", skew.Round(time.Second), v.maxSkew)
		return
	}
	p.add("clock-skew", ResultPass, "%s (at most %s)", skew.Round(time.Second), v.maxSkew)
}

// serverOffset is the API server's clock (its Date header, to the second) minus this
// machine's, taken at the middle of the request.
func serverOffset(ctx context.Context, cfg *rest.Config) (time.Duration, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	mid := start.Add(time.Since(start) / 2)
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return 0, fmt.Errorf("no Date in the answer of %s: %w", cfg.Host, err)
	}
	return date.Sub(mid.Truncate(time.Second)), nil
}
