package handshake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// ForgeSlice builds the ResourceSlice a consumer asks provider providerID for, in its
// tenant namespace ns, as Liqo's liqoctl create resourceslice writes it: the labels of
// the protocol, the class and the resources. The consumer's controllers fill the cluster
// IDs and the CSR.
func ForgeSlice(ns, name, providerID, class string, resources corev1.ResourceList) *authv1beta1.ResourceSlice {
	return &authv1beta1.ResourceSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: authv1beta1.GroupVersion.String(), Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			wire.RemoteClusterIDLabel: providerID, wire.ReplicationRequestedLabel: "true", wire.ReplicationDestinationLabel: providerID}},
		Spec: authv1beta1.ResourceSliceSpec{Class: authv1beta1.ResourceSliceClass(class), Resources: resources},
	}
}

// SliceDecision says, in words, what the provider decided on a slice: the reason when
// denied, else its class and resources (authv1beta1.SliceVerdict says which).
func SliceDecision(rs *authv1beta1.ResourceSlice) string {
	if _, denied := authv1beta1.SliceVerdict(rs.Status.Conditions); denied != nil {
		return fmt.Sprintf("%s (%s): %s", denied.Reason, denied.Type, denied.Message)
	}
	return fmt.Sprintf("class %s, %s", rs.Status.Class, authv1beta1.FormatResources(rs.Status.Resources))
}

// WaitSlice waits until the provider decided the consumer's slice and, when it accepted
// it, published the slice identity's certificate. A denial ends the wait with the
// provider's reason. When the provider has said nothing after silence, undecided (with
// the reason, e.g. which side still needs a manager) is said once on c; a timeout says it
// too.
func WaitSlice(ctx context.Context, c *Side, key client.ObjectKey, silence time.Duration, undecided string) (*authv1beta1.ResourceSlice, error) {
	warned := time.AfterFunc(silence, func() { c.Report.Warn("No answer from the provider yet: %s", undecided) })
	defer warned.Stop()
	return waitObject(ctx, c, key, nil, &authv1beta1.ResourceSliceList{}, "the provider to decide the ResourceSlice", "waiting for the ResourceSlice",
		func(rs *authv1beta1.ResourceSlice) (bool, string, error) {
			accepted, denied := authv1beta1.SliceVerdict(rs.Status.Conditions)
			switch {
			case denied != nil:
				return false, "", ScopedErrorf(Remote, "the provider denied ResourceSlice %s: %s", rs.Name, SliceDecision(rs))
			case !accepted:
				return false, "the provider has not decided yet: " + undecided, nil
			case !rs.Status.AuthParams.HasCertificate():
				return false, "accepted; waiting for the provider to issue the slice's certificate", nil
			}
			return true, "", nil
		})
}

// SliceIdentity is the Identity key of slice name in the consumer's tenant namespace ns.
func SliceIdentity(ns, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: wire.SliceIdentityName(name)}
}

// ErrRevocationUnproven means an identity given up was issued a certificate valid now,
// and none is left to prove its revocation with.
var ErrRevocationUnproven = errors.New("revocation not proven")

// DeleteSlice deletes the consumer's slice name in ns and waits until the consumer's
// controllers let it go (having removed its copy on the provider, when they reach it);
// then, with the slice identity's own certificates (creds, read before), it proves that
// identity lost its access on the provider's tenant namespaces: pinned, the one a
// handshake pinned in this cluster's tenant record (or the provider's own record names),
// where the copy is; those named (the control-plane Identity's and the slice Identity's,
// Identity writers' fields); and the one the protocol names for this cluster
// (wire.TenantNamespaceName). With no creds, issued says the slice was issued a
// certificate valid now: the revocation cannot be proven (ErrRevocationUnproven), after
// the slice is deleted all the same (giving an access up is never refused). With no pin
// ("") nor provider's word, where the copy is is only what Identities say, whose writers
// may have moved them all (helper-47): a proof that finds nothing left does not say
// "verified" either (ErrRevocationUnproven).
func DeleteSlice(ctx context.Context, c *Side, ns, name string, creds []*rest.Config, issued bool, pinned string, named ...string) error {
	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Client.Delete(ctx, rs); err != nil {
		if apierrors.IsNotFound(err) {
			// Already gone (a re-run), or never there: the rule of every removal
			// (CheckKnownPeer) is to say so and succeed, naming what there is.
			var names []string
			var list authv1beta1.ResourceSliceList
			if c.Client.List(ctx, &list, client.InNamespace(ns)) == nil {
				for _, rs := range list.Items {
					names = append(names, rs.Name)
				}
			}
			others := "there is none"
			if len(names) > 0 {
				others = "there are " + strings.Join(names, ", ")
			}
			c.Report.Info("There is no ResourceSlice %s/%s: nothing to remove (in that namespace %s)", ns, name, others)
			return nil
		}
		return c.Explain(err, "deleting the ResourceSlice")
	}
	held, err := waitSliceReleased(ctx, c, rs)
	if err != nil {
		return err
	}
	if held != nil {
		c.Report.Warn("ResourceSlice %s/%s stays, held by finalizers that are not this project's: %s; whoever set them removes them (kubectl edit resourceslices.%s -n %s %s)",
			ns, name, strings.Join(held.Finalizers, ", "), authv1beta1.GroupVersion.Group, ns, name)
		left, idErr := deleteHeldSliceIdentity(ctx, c, held)
		switch {
		case idErr != nil:
			return idErr
		case left:
			c.Report.Warn("Identity %s/%s stays: ResourceSlice %s does not control it, or it is being deleted already", ns, wire.SliceIdentityName(name), name)
		default:
			c.Report.Info("The Identity of ResourceSlice %s is deleted here", name)
		}
	} else {
		// The consumer's controllers give a slice's copy back only when they reach the
		// provider (a kubeconfig they refuse, a provider down): otherwise they let the
		// local slice go and the copy, with its grant, stays. Only the proof says which.
		c.Report.Info("ResourceSlice %s deleted here, and its Identity", name)
	}
	namespaces := sliceProofNamespaces(c, append([]string{pinned}, named...)...)
	removeCopy := func(where string) string {
		return fmt.Sprintf("its copy on the provider is likely left, with its grant (the consumer's controllers remove it only when they reach the provider): its administrator removes it with kubectl delete resourceslices.%s -n %s %s",
			authv1beta1.GroupVersion.Group, where, name)
	}
	if len(creds) == 0 {
		if issued {
			return ScopedErrorf(Remote, "%w: ResourceSlice %s was issued a certificate valid now, and neither its Identity nor its status holds one of user %q, for this cluster's key and the CA pinned for the provider, to prove with; if %s",
				ErrRevocationUnproven, name, authn.SliceUserName(name, c.ClusterID), removeCopy(namespaces[0]))
		}
		c.Report.Warn("The slice was issued no certificate: nothing to revoke")
		return nil
	}
	left, err := sliceAccessLeft(ctx, creds, namespaces, name)
	if err != nil {
		return ScopedErrorf(Remote, "verifying the revocation: %w", err)
	}
	if len(left) > 0 {
		return ScopedErrorf(Remote, "%w: the identity of ResourceSlice %s may still: %s; %s",
			ErrAccessNotRevoked, name, strings.Join(inWords(left), "; "), removeCopy(leftIn(left, namespaces)))
	}
	if pinned == "" {
		return ScopedErrorf(Remote, "%w: the identity of ResourceSlice %s may do nothing in %s, but this cluster pinned no tenant namespace on the provider (a peering older than the pin, or its pins forgotten) and its copy may be elsewhere, where its Identities do not say (whoever may write Identities may have moved them): liqoctl authenticate with both kubeconfigs pins the namespace the provider keeps, and the provider's administrator can check that no ResourceSlice %s is left for this cluster",
			ErrRevocationUnproven, name, strings.Join(namespaces, ", "), name)
	}
	c.Report.Info("Access of the slice's identity revoked: verified with its own certificate")
	return nil
}

// sliceProofNamespaces are where a slice's proof asks: those named, each once, in order
// (first c's tenant namespace on the provider pinned in its record, ProviderNamespace,
// where the copy is; then the Identities' spec.namespace, Identity writers' fields), and
// the protocol's.
func sliceProofNamespaces(c *Side, others ...string) []string {
	var namespaces []string
	for _, ns := range append(others, wire.TenantNamespaceName(c.ClusterID)) {
		if ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces
}

// sliceAccessLeft is what the identity of slice name may still do in namespaces, asked with
// each of creds. The copy's finalize deleted its bindings a moment ago: the authorizer may
// not have seen it yet.
func sliceAccessLeft(ctx context.Context, creds []*rest.Config, namespaces []string, name string) ([]stillAllowed, error) {
	return revocation.Settled(ctx, revocation.AuthorizerLag, func(ctx context.Context) ([]stillAllowed, error) {
		return selfAllowedWithEach(ctx, creds, namespaces, access.SliceRules(name))
	})
}

// waitSliceReleased waits until the consumer's controllers let deleted slice rs go: gone,
// or their finalizer off. A finalizer of someone else's holds the slice, not its access,
// and never the other slices (helper-38's F3: a slice planted with both to go first): held
// is the slice such finalizers keep (nil when it is gone).
func waitSliceReleased(ctx context.Context, c *Side, rs *authv1beta1.ResourceSlice) (held *authv1beta1.ResourceSlice, err error) {
	err = waitFor(ctx, c.Client, client.ObjectKeyFromObject(rs), &authv1beta1.ResourceSliceList{}, "the ResourceSlice to be deleted on both sides",
		func(rs *authv1beta1.ResourceSlice) (bool, string, error) {
			held = rs
			return rs == nil || rs.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(rs, wire.ConsumerSliceFinalizer),
				"the consumer's controllers remove its copy on the provider first: does liqo-auth-manager (or liqoctl's in-process controllers) run here?", nil
		})
	if err != nil {
		return nil, c.Explain(err, "deleting the ResourceSlice")
	}
	return held, nil
}

// deleteHeldSliceIdentity deletes the Identity of slice held, deleted but kept by others'
// finalizers: the garbage collector keeps what the slice controls while it exists, and a
// slice writer who stripped the consumer controllers' finalizer before the deletion kept
// their finalize from deleting it (helper-39's F4): the slice's credential would stay
// beside a slice said deleted. Only an Identity the slice controls is deleted (this UID):
// left says one stays (another's, or being deleted).
func deleteHeldSliceIdentity(ctx context.Context, c *Side, held *authv1beta1.ResourceSlice) (left bool, err error) {
	var id authv1beta1.Identity
	err = c.Client.Get(ctx, SliceIdentity(held.Namespace, held.Name), &id)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, c.Explain(err, "reading the Identity of the ResourceSlice held")
	case !metav1.IsControlledBy(&id, held) || id.DeletionTimestamp != nil:
		return true, nil
	}
	err = c.Client.Delete(ctx, &id, client.Preconditions{UID: &id.UID})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		return true, nil
	case err != nil:
		return false, c.Explain(err, "deleting the Identity of the ResourceSlice held")
	}
	return false, nil
}

// selfAllowedWithEach is selfAllowedIn asked with each of creds: every access any of them
// keeps. Around a key rotation the provider binds the key of a slice's current request
// only, and an older certificate (which an Identity writer may put back) proves nothing
// alone.
func selfAllowedWithEach(ctx context.Context, creds []*rest.Config, namespaces []string, rules []rbacv1.PolicyRule) ([]stillAllowed, error) {
	var left []stillAllowed
	for _, cred := range creds {
		l, err := selfAllowedIn(ctx, cred, namespaces, rules)
		if err != nil {
			return nil, err
		}
		for _, a := range l {
			if !slices.Contains(left, a) {
				left = append(left, a)
			}
		}
	}
	return left, nil
}

// leftIn is the namespace of namespaces in which an access was left (the first one; the
// first of namespaces when the access left is cluster-wide).
func leftIn(left []stillAllowed, namespaces []string) string {
	for _, ns := range namespaces {
		for _, a := range left {
			if a.namespace == ns {
				return ns
			}
		}
	}
	return namespaces[0]
}

// SlicesFor lists the consumer's slices asked of provider providerID: every slice in that
// provider's tenant namespace here but the provider's copies given to it, whatever their
// labels say, which a slice writer may change to hide a slice whose certificate still
// works (askedOfPeer, the rule of readPeerSlices).
func SlicesFor(ctx context.Context, c *Side, providerID string) ([]authv1beta1.ResourceSlice, error) {
	if err := c.identified(ctx); err != nil {
		return nil, err
	}
	tn, err := tenantNamespaceOrDefault(ctx, c, providerID)
	if err != nil {
		return nil, err
	}
	var list authv1beta1.ResourceSliceList
	if err := c.Client.List(ctx, &list, client.InNamespace(tn)); err != nil {
		return nil, err
	}
	var out []authv1beta1.ResourceSlice
	for i := range list.Items {
		if askedOfPeer(&list.Items[i], c.ClusterID) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// askedOfPeer says whether rs, in the tenant namespace of a peer on cluster self, is asked
// of that peer by self: anything but a provider's copy given to another cluster (the
// tenant may write one claiming a third cluster; self's own requests name self).
func askedOfPeer(rs *authv1beta1.ResourceSlice, self string) bool {
	consumer, providerCopy := access.SliceConsumer(rs)
	return !providerCopy || consumer == self
}

// CertificateExpiry words when a slice's certificate expires ("" when it has none).
func CertificateExpiry(rs *authv1beta1.ResourceSlice) string {
	if rs.Status.Certificate == nil || rs.Status.Certificate.NotAfter == nil {
		return ""
	}
	return rs.Status.Certificate.NotAfter.UTC().Format(time.RFC3339)
}

// DeleteSlices deletes the consumer's slices names in its tenant namespace ns of provider
// providerID, each with the proof that its identity lost its access. A slice deleted
// whose proof failed (ErrRevocationUnproven, ErrAccessNotRevoked) does not stop the
// others: every such failure is returned at the end, joined (OnlyProofsFailed says so);
// any other error stops at that slice, joined to the proofs that failed before it.
func DeleteSlices(ctx context.Context, s *Side, ns, providerID string, names ...string) error {
	return deleteSlices(ctx, s, ns, providerID, "", names)
}

// DeleteSlicesWithProvider is DeleteSlices with the provider's side pr at hand (both
// kubeconfigs): where no tenant namespace is pinned here, the one the provider's own
// record names for this cluster is its word, where the proofs ask and may say "verified".
func DeleteSlicesWithProvider(ctx context.Context, c, pr *Side, ns string, names ...string) error {
	word, err := pr.TenantNamespace(ctx, c.ClusterID)
	if err != nil {
		word = "" // none recorded, or not readable: the pin alone decides
	}
	return deleteSlices(ctx, c, ns, pr.ClusterID, word, names)
}

// deleteSlices is DeleteSlices; providerWord is the tenant namespace the provider's own
// record names for this cluster ("" when not at hand). With neither a pin nor that word,
// where the copies are is only what Identities say, whose writers may have moved them all
// (helper-47): a proof that finds nothing left there does not say "verified", it says so
// (ErrRevocationUnproven).
func deleteSlices(ctx context.Context, s *Side, ns, providerID, providerWord string, names []string) error {
	remoteNS := ""
	var id authv1beta1.Identity
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.IdentityName(providerID)}, &id); err == nil {
		remoteNS = ptr.Deref(id.Spec.Namespace, "")
	}
	rec, err := cluster.GetTenantRecord(ctx, s.Client, s.Namespace, providerID)
	if err != nil {
		return s.Explain(err, "reading the tenant record of provider "+providerID)
	}
	pinned, guessed := rec.ProviderNamespaceOr(providerWord), ""
	if rec != nil && rec.PinnedByManager {
		// The manager's guess for a Peering's legacy peering (helper-48): asked, never
		// taken as where the copy is.
		guessed, pinned = pinned, providerWord
	}
	if pinned == "" && s.Controllers().Liqo() {
		pinned = wire.TenantNamespaceName(s.ClusterID) // a Liqo consumer keeps no pin
	}
	failed := &SliceProofsFailed{}
	for _, name := range names {
		creds, issued, sliceNS, err := SliceRevocationCredential(ctx, s, ns, providerID, name, time.Now())
		if err == nil {
			err = DeleteSlice(ctx, s, ns, name, creds, issued, pinned, guessed, remoteNS, sliceNS)
		}

		switch {
		case err == nil:
		case proofFailed(err):
			var again func(context.Context) ([]stillAllowed, error)
			if errors.Is(err, ErrAccessNotRevoked) {
				namespaces := sliceProofNamespaces(s, pinned, guessed, remoteNS, sliceNS)
				again = func(ctx context.Context) ([]stillAllowed, error) {
					// A certificate that expired since answers 401, which a proof reads
					// as "may do nothing": only those valid now are asked again.
					valid := validNow(creds, time.Now())
					if len(valid) == 0 {
						return nil, errors.New("no certificate of the slice is valid now")
					}
					return sliceAccessLeft(ctx, valid, namespaces, name)
				}
			}
			s.Report.Warn("%v: the other slices go on", err)
			failed.errs, failed.names, failed.again = append(failed.errs, err), append(failed.names, name), append(failed.again, again)
		default:
			return errors.Join(append(failed.errs, err)...)
		}
	}
	if len(failed.errs) == 0 {
		return nil
	}
	return failed
}

// validNow are those of creds whose certificate is valid at now.
func validNow(creds []*rest.Config, now time.Time) []*rest.Config {
	var out []*rest.Config
	for _, cfg := range creds {
		if cert, err := authn.ParseCertificate(cfg.CertData); err == nil && now.Before(cert.NotAfter) {
			out = append(out, cfg)
		}
	}
	return out
}

// SliceProofsFailed is DeleteSlices' error when every slice was deleted and only proofs
// failed (OnlyProofsFailed): each slice's failure, and how to ask its proof again.
type SliceProofsFailed struct {
	errs  []error
	names []string
	// again asks a failed proof again (nil: there is no credential to ask with).
	again []func(context.Context) ([]stillAllowed, error)
}

// Error is every failure, a line each.
func (e *SliceProofsFailed) Error() string { return errors.Join(e.errs...).Error() }

// Unwrap is the failures.
func (e *SliceProofsFailed) Unwrap() []error { return e.errs }

// ProveSlicesAgain asks again the slices' proofs of err (from DeleteSlices) that found an
// access left, once the control plane's removal deleted the consumer's Tenant on the
// provider, whose finalize takes the slices' copies and their grants: it returns what
// still fails (nil when every proof now holds), and says each one that now holds. Any
// other err is returned as it is.
func ProveSlicesAgain(ctx context.Context, c *Side, err error) error {
	var sp *SliceProofsFailed
	if !errors.As(err, &sp) {
		return err
	}
	var still []error
	for i, e := range sp.errs {
		if sp.again[i] == nil {
			still = append(still, e)
			continue
		}
		left, againErr := sp.again[i](ctx)
		if againErr != nil || len(left) > 0 {
			still = append(still, e)
			continue
		}
		c.Report.Info("Access of the identity of ResourceSlice %s revoked with the Tenant: verified with its own certificate", sp.names[i])
	}
	return errors.Join(still...)
}

// proofFailed says err is a revocation proof's failure: what it proves about was deleted.
func proofFailed(err error) bool {
	return errors.Is(err, ErrRevocationUnproven) || errors.Is(err, ErrAccessNotRevoked)
}

// OnlyProofsFailed says that err, from DeleteSlices, holds only failed proofs: every slice
// was deleted, and what comes after the slices (the control plane's revocation, which a
// slice's failed proof does not change) may go on.
func OnlyProofsFailed(err error) bool {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if !proofFailed(e) {
			return false
		}
	}
	return err != nil
}

// SliceRevocationCredential is RevocationCredential for the identity of the consumer's
// slice name (in its tenant namespace ns, asked of provider providerID): the certificates
// of the slice's Identity and of the slice's status (the provider's answer, copied there
// by this cluster's controllers), each checked to be for the slice's user
// (authn.SliceUserName), a key of this cluster's and issued by the CA pinned for the
// provider; both when they differ, for the proof asks with each (around a key rotation an
// older certificate, which an Identity writer may put back, matches no binding). An
// Identity writer may delete or rewrite the Identity; the status is another principal's. issued says that either held a certificate valid now,
// or the status says one was issued: with no credential, the revocation cannot be proven.
// A certificate that does not check is said and passed over: it never stops the deletion.
// named is the tenant namespace on the provider the slice's Identity names ("" for none),
// one more place for the proof to ask (an Identity writer's field: asking more places only
// makes the proof stricter).
func SliceRevocationCredential(ctx context.Context, c *Side, ns, providerID, name string, now time.Time) (creds []*rest.Config, issued bool, named string, err error) {
	if err := c.identified(ctx); err != nil {
		return nil, false, "", err
	}
	type source struct {
		what string
		ap   *authv1beta1.AuthParams
	}
	var sources []source
	var id authv1beta1.Identity
	switch err := c.Client.Get(ctx, SliceIdentity(ns, name), &id); {
	case err == nil:
		sources = append(sources, source{fmt.Sprintf("Identity %s/%s", ns, id.Name), &id.Spec.AuthParams})
		named = ptr.Deref(id.Spec.Namespace, "")
	case !apierrors.IsNotFound(err):
		return nil, false, "", c.Explain(err, "reading the Identity of ResourceSlice "+name)
	}
	var rs authv1beta1.ResourceSlice
	switch err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rs); {
	case err == nil:
		sources = append(sources, source{fmt.Sprintf("the status of ResourceSlice %s/%s", ns, name), rs.Status.AuthParams})
		if info := rs.Status.Certificate; info != nil && info.NotAfter != nil && now.Before(info.NotAfter.Time) {
			issued = true
		}
	case !apierrors.IsNotFound(err):
		return nil, false, "", c.Explain(err, "reading ResourceSlice "+name)
	}
	user := authn.SliceUserName(name, c.ClusterID)
	for _, src := range sources {
		cfg, skipped, held, err := c.credential(ctx, src.what, src.ap, user, providerID, nil, now, true)
		issued = issued || held
		if err != nil {
			c.Report.Warn("%s: not taken to prove the slice's revocation", c.unscoped(err))
			continue
		}
		if cfg != nil && !slices.ContainsFunc(creds, func(o *rest.Config) bool { return bytes.Equal(o.CertData, cfg.CertData) }) {
			c.warnSkippedProxy(src.what, skipped, providerID)
			creds = append(creds, cfg)
		}
	}
	return creds, issued, named, nil
}

// WaitSliceIdentity waits until the consumer's controllers created the Identity of slice
// name (in tenant namespace ns) and wrote its kubeconfig for the certificate with serial.
func WaitSliceIdentity(ctx context.Context, c *Side, ns, name, serial string) (*authv1beta1.Identity, error) {
	var out *authv1beta1.Identity
	err := waitFor(ctx, c.Client, SliceIdentity(ns, name), &authv1beta1.IdentityList{}, "the consumer to write the kubeconfig of the slice's Identity",
		func(id *authv1beta1.Identity) (bool, string, error) {
			if id == nil {
				return false, "the Identity is not created yet", nil
			}
			out = id
			return identityWritten(id, serial, nil)
		})
	if err != nil {
		return nil, c.Explain(err, "waiting for the Identity status")
	}
	return out, nil
}
