package handshake

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Pair is a consumer and a provider, both reachable by the CLI.
type Pair struct {
	Consumer, Provider *Side
	// ProxyURL is passed to the Tenant.
	ProxyURL string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// WaitForApproval: when the provider's administrator must approve this consumer, wait
	// (under the context's deadline) until they do, saying so once; otherwise the wait
	// returns ErrApprovalPending as soon as the Tenant is known to wait, for a caller that
	// must not block (a reconcile) and comes back later. liqoctl authenticate sets it.
	WaitForApproval bool

	// consumerIdentity is the consumer's credential on the provider, kept by Unauthenticate.
	consumerIdentity *rest.Config
}

func (p *Pair) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// State is what is already in place for a pair.
type State struct {
	Tenant   *authv1beta1.Tenant
	Identity *authv1beta1.Identity
	// KeyAccepted: the provider accepted the consumer's current key; no new nonce is
	// needed, though the certificate may have to be renewed first.
	KeyAccepted bool
	// TenantAccepted: KeyAccepted, and a certificate valid now is published.
	TenantAccepted bool
	// Complete: the consumer's Identity holds the provider's current certificate, and the
	// Tenant was accepted for the proxy this run asks for.
	Complete bool
	// Certificate is the certificate the provider publishes for the consumer's current
	// key, when TenantAccepted.
	Certificate *x509.Certificate
	// ProviderRecord is the provider's record of the consumer (nil: none, or these
	// credentials may not read it, or Liqo's controllers run there): its administrator's
	// decisions, and what its manager published.
	ProviderRecord *cluster.TenantRecord
	// NotPublished says why what the Tenant's status publishes is not what the provider
	// published (nil when it is, or when nothing is published).
	NotPublished error
	// ConsumerNamespace and ProviderNamespace are the tenant namespaces, when the state was
	// read ensuring them (InspectStarting): Authenticate's first step is then done.
	ConsumerNamespace, ProviderNamespace string
}

// Inspect reads, without changing anything, how far the handshake of the pair went.
func (p *Pair) Inspect(ctx context.Context) (*State, error) {
	return p.inspect(ctx, false)
}

// inspect is Inspect; with ensure set, the tenant namespaces are ensured (Authenticate's
// first step) where Inspect only looks them up, and the state says which they are: the
// Tenant and the Identity are read in them, and the namespaces are not read again.
func (p *Pair) inspect(ctx context.Context, ensure bool) (*State, error) {
	st := &State{}
	c, pr := p.Consumer, p.Provider
	// The two clusters are read at once.
	var eg errgroup.Group
	eg.Go(func() error { return p.readTenant(ctx, st, ensure) })
	// Ensuring the provider's tenant namespace reads its record: this project's
	// controllers' is not read twice.
	shareRecord := ensure && !pr.Controllers().Liqo()
	if !shareRecord {
		eg.Go(func() error { return p.readProviderRecord(ctx, st) })
	}
	eg.Go(func() error { return p.readIdentity(ctx, st, ensure) })
	if ensure {
		// Authenticate needs the consumer's key on every path (to read an accepted Tenant,
		// or to sign the nonce and forge the Tenant once the provider made the nonce): it is
		// read with the state, not in a row after the nonce.
		eg.Go(func() error { _, err := c.ClusterKey(ctx); return err })
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if shareRecord {
		if rec, ok := pr.notedRecord(c.ClusterID); ok {
			st.ProviderRecord = rec
		} else if err := p.readProviderRecord(ctx, st); err != nil {
			return nil, err
		}
	}
	if st.Tenant == nil {
		return st, nil
	}
	key, err := c.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	fp, err := authn.Fingerprint(key.Public())
	if err != nil {
		return nil, err
	}
	if pr.Controllers().Liqo() {
		p.inspectLiqoAcceptance(st, key.Public())
	} else {
		p.inspectAcceptance(st, fp)
	}
	if st.Complete, err = p.complete(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// complete says whether the pair in st is done. An Identity that reaches the provider
// otherwise than this run asks (another proxy, or server), or names another tenant
// namespace there than the one the Tenant is in, is not: Authenticate applies it again, or
// refuses a proxy other than the pinned one (ErrProxyChanged); nor is a pair whose
// consumer pins no proxy or no tenant namespace (pinsMissing).
func (p *Pair) complete(ctx context.Context, st *State) (bool, error) {
	if !st.TenantAccepted || !identityHolds(st.Identity, st.Tenant, st.Certificate, p.Consumer.Controllers().Liqo()) ||
		st.Identity.Spec.AuthParams.APIServer != st.Tenant.Status.AuthParams.APIServer ||
		ptr.Deref(st.Identity.Spec.AuthParams.ProxyURL, "") != p.ProxyURL ||
		ptr.Deref(st.Identity.Spec.Namespace, "") != st.Tenant.Namespace {
		return false, nil
	}
	missing, err := p.pinsMissing(ctx)
	return !missing, err
}

// pinsMissing says whether the consumer's tenant record pins no proxy or no tenant
// namespace on the provider (a peering older than the pins, an unpin), or only the
// manager's guess of them (PinnedByManager): the pair is then
// not done, and Authenticate pins the run's, without which the consumer's controllers and
// proofs take no proxy (cluster.TenantRecord.CheckIdentityProxy) and the Identity's
// namespace, an Identity writer's field (helper-43's F1, F2). The record is the one this
// command noted while ensuring the tenant namespace, else (Inspect alone: a dry run, a
// Peering) read now.
func (p *Pair) pinsMissing(ctx context.Context) (bool, error) {
	c, pr := p.Consumer, p.Provider
	if c.Controllers().Liqo() {
		return false, nil
	}
	rec, ok := c.notedRecord(pr.ClusterID)
	if !ok {
		var err error
		if rec, err = cluster.GetTenantRecord(ctx, c.Client, c.Namespace, pr.ClusterID); err != nil {
			return false, c.Explain(err, "reading the tenant record")
		}
	}
	return rec == nil || rec.ProxyURL == nil || rec.ProviderTenantNamespace == "" || rec.PinnedByManager, nil
}

// readTenant is Inspect's read of the consumer's Tenant on the provider into st.Tenant
// (left nil when there is no tenant namespace or no Tenant); with ensure, in the tenant
// namespace it ensured (st.ProviderNamespace), beside the reads that check it.
func (p *Pair) readTenant(ctx context.Context, st *State, ensure bool) (err error) {
	c, pr := p.Consumer, p.Provider
	st.Tenant, err = readInState(ctx, pr, c.ClusterID, ensure, &st.ProviderNamespace, "reading the Tenant",
		func(ctx context.Context, tn string) (*authv1beta1.Tenant, error) {
			t := &authv1beta1.Tenant{}
			return t, pr.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: c.ClusterID}, t)
		})
	return err
}

// readInState reads, with read, the object Inspect reads in the tenant namespace of
// remoteID on s (nil when there is no namespace to read in, see stateNamespace, or no
// object): with ensure, beside the reads that check an existing namespace, or once it is
// ensured. read's error, but NotFound, is explained as doing.
func readInState[T any](ctx context.Context, s *Side, remoteID string, ensure bool, ensured *string, doing string, read func(ctx context.Context, tn string) (*T, error)) (*T, error) {
	var got *T
	var readErr error
	readNow := func(ctx context.Context, tn string) {
		got, readErr = read(ctx, tn)
		if apierrors.IsNotFound(readErr) {
			got, readErr = nil, nil
		}
	}
	tn, look, readIn, err := stateNamespace(ctx, s, remoteID, ensure, ensured, readNow)
	if !look || err != nil {
		return nil, err
	}
	if !readIn {
		readNow(ctx, tn)
	}
	if readErr != nil {
		return nil, s.Explain(readErr, doing)
	}
	return got, nil
}

// stateNamespace is the namespace Inspect reads an object of remoteID in on s: the tenant
// namespace, looked up, or, with ensure, ensured and kept in *ensured. look is false when
// there is nothing to read: no tenant namespace found (Inspect plans, it does not act: a
// tenant namespace not found, or not readable now, is one to ensure, and the step that
// ensures it reports its error), or one made a moment ago. With ensure, readIn may run in
// an existing namespace beside the reads that check it; read says it did, in the namespace
// returned, which checked out: what it read counts (otherwise it is read again there).
func stateNamespace(ctx context.Context, s *Side, remoteID string, ensure bool, ensured *string, readIn ReadIn) (tn string, look, read bool, err error) {
	if !ensure {
		name, lookupErr := s.TenantNamespace(ctx, remoteID)
		return name, lookupErr == nil, false, nil
	}
	ens, err := s.Controllers().EnsureTenantNamespace(ctx, s, remoteID, readIn)
	if err != nil {
		return "", false, false, err
	}
	*ensured = ens.Name
	return ens.Name, !ens.Created, ens.Read, nil
}

// readProviderRecord is Inspect's read of the provider's record of the consumer into
// st.ProviderRecord.
func (p *Pair) readProviderRecord(ctx context.Context, st *State) error {
	c, pr := p.Consumer, p.Provider
	rec, err := pr.Controllers().Record(ctx, pr, c.ClusterID)
	if err != nil {
		return pr.Explain(err, "reading the tenant record")
	}
	st.ProviderRecord = rec
	return nil
}

// readIdentity is Inspect's read of the consumer's Identity of the provider into
// st.Identity (left nil when there is no tenant namespace or no Identity); with ensure, in
// the tenant namespace it ensured (st.ConsumerNamespace).
func (p *Pair) readIdentity(ctx context.Context, st *State, ensure bool) (err error) {
	c, pr := p.Consumer, p.Provider
	st.Identity, err = readInState(ctx, c, pr.ClusterID, ensure, &st.ConsumerNamespace, "reading the Identity",
		func(ctx context.Context, tn string) (*authv1beta1.Identity, error) {
			id := &authv1beta1.Identity{}
			return id, c.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.IdentityName(pr.ClusterID)}, id)
		})
	return err
}

// inspectLiqoAcceptance is Inspect's verdict on st.Tenant when Liqo's controllers run on
// the provider: they record no acceptance, so their answer is the certificate itself, for
// the consumer's key pub and chaining to a CA the provider's kubeconfig trusts.
func (p *Pair) inspectLiqoAcceptance(st *State, pub crypto.PublicKey) {
	cert, err := verifyPublished(st.Tenant, pub, p.Consumer.ClusterID, p.now())
	if err == nil {
		err = errors.Join(checkPublishedProxy(st.Tenant), p.Provider.checkTrustedCA(st.Tenant.Status.AuthParams.CA))
	}
	st.KeyAccepted, st.TenantAccepted, st.Certificate = err == nil, err == nil, cert
}

// inspectAcceptance is Inspect's verdict on st.Tenant when this project's controllers run
// on the provider: the key whose fingerprint is fp accepted, and a certificate valid now
// that the provider's record says it published.
func (p *Pair) inspectAcceptance(st *State, fp string) {
	ready := meta.IsStatusConditionTrue(st.Tenant.Status.Conditions, authv1beta1.ConditionReady)
	st.KeyAccepted = st.Tenant.Status.AcceptedKeyFingerprint == fp &&
		meta.IsStatusConditionTrue(st.Tenant.Status.Conditions, authv1beta1.ConditionAuthenticated)
	st.TenantAccepted = st.KeyAccepted && ready && certValid(st.Tenant, p.now())
	if !st.TenantAccepted {
		return
	}
	// What the status publishes counts only if the provider published it: a status
	// writer may have put another CA, server or certificate there.
	var err error
	st.Certificate, err = authn.ParseCertificate(st.Tenant.Status.AuthParams.SignedCRT)
	if err == nil {
		err = p.Provider.checkPublishedBy(st.ProviderRecord, st.Tenant, st.Certificate)
		st.NotPublished = err
	}
	if err != nil {
		st.TenantAccepted, st.Certificate = false, nil
	}
}

// verifyPublished checks the certificate a Tenant's status publishes as the consumer
// does: for its own key and cluster ID, valid at now, chaining to the CA given with it.
func verifyPublished(t *authv1beta1.Tenant, pub crypto.PublicKey, consumerID string, now time.Time) (*x509.Certificate, error) {
	ap := t.Status.AuthParams
	if !ap.HasCertificate() {
		return nil, fmt.Errorf("no certificate published yet")
	}
	if t.Status.TenantNamespace == "" {
		return nil, fmt.Errorf("no tenant namespace published yet")
	}
	return authn.VerifyCertificate(ap.SignedCRT, ap.CA, pub, consumerID, now)
}

// identityHolds reports whether the consumer's Identity holds the certificate cert the
// Tenant t publishes. A Liqo consumer (liqo set) writes no more than a
// kubeconfigSecretRef: its Identity holds cert when its spec carries it and that
// reference is set.
func identityHolds(id *authv1beta1.Identity, t *authv1beta1.Tenant, cert *x509.Certificate, liqo bool) bool {
	if id == nil || cert == nil {
		return false
	}
	if liqo {
		return id.Status.KubeconfigSecretRef != nil && bytes.Equal(id.Spec.AuthParams.SignedCRT, t.Status.AuthParams.SignedCRT)
	}
	return id.Status.Certificate != nil && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady) &&
		id.Status.Certificate.SerialNumber == cert.SerialNumber.Text(16)
}

// ErrProxyChanged means a run asked for another proxy than the one the consumer pinned for
// the provider: it changes nothing.
var ErrProxyChanged = cluster.ErrProxyNotPinned

// Authenticate runs the handshake: the consumer gets an Identity on the provider. Steps
// already done are not redone: a pair whose Tenant is accepted skips the nonce exchange,
// and a complete pair changes nothing.
func (p *Pair) Authenticate(ctx context.Context, st *State) (*authv1beta1.Identity, error) {
	c, pr := p.Consumer, p.Provider
	cTN, pTN, err := p.ensureTenantNamespaces(ctx, st)
	if err != nil {
		return nil, err
	}
	// The pin of the provider's CA, from the consumer's tenant record read as its tenant
	// namespace was ensured.
	noted := p.notedRecord()
	if pinErr := p.checkPins(noted, pTN); pinErr != nil {
		return nil, pinErr
	}
	if checkAdminStateErr := checkAdminState(st.Tenant, st.ProviderRecord, c.ClusterID); checkAdminStateErr != nil {
		return nil, checkAdminStateErr
	}
	t, err := p.acceptedTenant(ctx, st, cTN, pTN)
	if err != nil {
		return nil, err
	}
	cert, err := authn.ParseCertificate(t.Status.AuthParams.SignedCRT)
	if err != nil {
		return nil, pr.Explain(err, "reading the certificate the provider published")
	}
	id, err := ForgeIdentity(pr.ClusterID, t, cTN, p.ProxyURL)
	if err != nil {
		return nil, pr.Explain(err, "generating the Identity")
	}
	pr.Report.Info("Identity correctly generated")
	if !c.Controllers().Liqo() {
		// A Liqo consumer keeps no pin: this project's record is not its. A pin refused
		// (another handshake pinned meanwhile) is refused before the Identity is applied:
		// a refused run changes nothing.
		if pinErr := pinProviderOnce(ctx, c, pr.ClusterID, t.Status.AuthParams.CA, p.ProxyURL, pTN, noted); pinErr != nil {
			return nil, pinErr
		}
	}
	if applyIdentityErr := ApplyIdentity(ctx, c, id); applyIdentityErr != nil {
		return nil, applyIdentityErr
	}
	c.Report.Info("Identity correctly applied on consumer cluster")
	if id, err = c.Controllers().WaitIdentity(ctx, c, id, t.Status.AuthParams.SignedCRT, cert.SerialNumber.Text(16)); err != nil {
		return nil, err
	}
	c.Report.Info("Identity status is filled")
	return id, nil
}

// CheckPins refuses a run that asks for another proxy than the one the consumer pinned
// for the provider in its tenant record (ErrProxyChanged), or would have this cluster's
// Tenant in another tenant namespace there, pTN, than the pinned one
// (cluster.ErrTenantNamespaceNotPinned), as the command read the record (where only its
// administrator and manager write): the run would change nothing. Authenticate asks it as
// soon as the tenant namespaces are ensured, before the nonce exchange; a dry run asks it
// with the namespaces it plans (PlannedNamespaces). The provider's Tenant says nothing
// here: whoever may write it there may have changed its proxy.
func (p *Pair) CheckPins(ctx context.Context, pTN string) error {
	c, pr := p.Consumer, p.Provider
	rec := p.notedRecord()
	if rec == nil && !c.Controllers().Liqo() {
		var err error
		if rec, err = cluster.GetTenantRecord(ctx, c.Client, c.Namespace, pr.ClusterID); err != nil {
			return c.Explain(err, "reading the tenant record")
		}
	}
	return p.checkPins(rec, pTN)
}

// checkPins is CheckPins with the record as read (nil: none, or a Liqo consumer's).
func (p *Pair) checkPins(noted *cluster.TenantRecord, pTN string) error {
	if noted != nil && noted.PinnedByManager {
		return nil // the manager's guess, which this run replaces (pinProviderOnce)
	}
	if err := noted.CheckPinnedProxy(p.Consumer.Namespace, p.ProxyURL); err != nil {
		return fmt.Errorf("%s%w", p.Consumer.prefix(), err)
	}
	if err := noted.CheckProviderNamespace(pTN); err != nil {
		return fmt.Errorf("%s%w", p.Consumer.prefix(), err)
	}
	return nil
}

// PlannedNamespaces are the tenant namespaces a run would ensure, each on its side: the
// one its tenant record names, else (none, or none readable: the run's own step says why)
// the protocol's.
func (p *Pair) PlannedNamespaces(ctx context.Context) (cTN, pTN string) {
	c, pr := p.Consumer, p.Provider
	planned := func(s *Side, remoteID string) string {
		if tn, err := s.TenantNamespace(ctx, remoteID); err == nil && tn != "" {
			return tn
		}
		return wire.TenantNamespaceName(remoteID)
	}
	return planned(c, pr.ClusterID), planned(pr, c.ClusterID)
}

// ensureTenantNamespaces is Authenticate's first step: the two tenant namespaces, ensured
// at once (unless st says they were, as it was read) and reported in order (the
// consumer's first), as the consumer's and the provider's names.
func (p *Pair) ensureTenantNamespaces(ctx context.Context, st *State) (cTN, pTN string, err error) {
	c, pr := p.Consumer, p.Provider
	if st.ConsumerNamespace != "" && st.ProviderNamespace != "" {
		c.Report.Info("Tenant namespace correctly ensured")
		pr.Report.Info("Tenant namespace correctly ensured")
		return st.ConsumerNamespace, st.ProviderNamespace, nil
	}
	var errC, errP error
	var wg sync.WaitGroup
	wg.Go(func() { cTN, errC = c.EnsureTenantNamespace(ctx, pr.ClusterID) })
	wg.Go(func() { pTN, errP = pr.EnsureTenantNamespace(ctx, c.ClusterID) })
	wg.Wait()
	if errC != nil {
		return "", "", errC
	}
	c.Report.Info("Tenant namespace correctly ensured")
	if errP != nil {
		return "", "", errP
	}
	pr.Report.Info("Tenant namespace correctly ensured")
	return cTN, pTN, nil
}

// acceptedTenant is the step of Authenticate that gets the Tenant the provider answered,
// from where Inspect left the pair (st): an accepted Tenant as it is, an accepted key's
// Tenant once the provider published (or renewed) its certificate, otherwise the nonce
// exchange.
func (p *Pair) acceptedTenant(ctx context.Context, st *State, cTN, pTN string) (*authv1beta1.Tenant, error) {
	pr := p.Provider
	t := st.Tenant
	var err error
	switch {
	case st.TenantAccepted:
		pr.Report.Info("Tenant already accepted: certificate %s valid until %s", st.Certificate.SerialNumber.Text(16), st.Certificate.NotAfter.UTC().Format(time.RFC3339))
	case st.KeyAccepted && awaitsApproval(t):
		pr.Report.Info("Tenant already accepted: its key waits for the provider's administrator's approval")
		if t, err = p.waitTenant(ctx, t); err != nil {
			return nil, err
		}
		pr.Report.Info("Tenant status is filled")
	case st.KeyAccepted && st.NotPublished != nil:
		pr.Report.Warn("%v: waiting for the provider to publish its own", st.NotPublished)
		if t, err = p.waitTenant(ctx, t); err != nil {
			return nil, err
		}
		pr.Report.Info("Tenant status is filled")
	case st.KeyAccepted:
		pr.Report.Info("Tenant already accepted, but its certificate expired: waiting for the provider to renew it")
		if t, err = p.waitTenant(ctx, t); err != nil {
			return nil, err
		}
		pr.Report.Info("Tenant status is filled")
	default:
		if t, err = p.exchange(ctx, cTN, pTN); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// exchange is the nonce challenge and the Tenant: everything up to the provider's
// certificate.
func (p *Pair) exchange(ctx context.Context, cTN, pTN string) (*authv1beta1.Tenant, error) {
	c, pr := p.Consumer, p.Provider
	n, err := EnsureNonce(ctx, pr, pTN, c.ClusterID, p.now())
	if err != nil {
		return nil, err
	}
	nonce := n.Value
	pr.Report.Info("Nonce secret ensured")
	if n.Created {
		pr.Report.Info("Nonce generated successfully")
	} else {
		pr.Report.Info("Nonce reused: the unused one created at %s", n.CreatedAt.UTC().Format(time.RFC3339))
	}
	pr.Report.Info("Nonce retrieved")
	key, err := c.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	if c.Controllers().Liqo() {
		return p.exchangeThroughLiqo(ctx, key, nonce, cTN, pTN)
	}
	// Signed here, with the cluster key this command reads anyway to make the CSR: this
	// project's controllers sign the same way and leave a nonce signed by that key alone,
	// so the handshake does not wait for them (in-process, for their caches to fill). The
	// signed nonce kept on the consumer (as Liqo keeps it) and the Tenant on the provider
	// need nothing of each other: they are written at once, and reported in order.
	sig, err := authn.SignNonce(key, nonce)
	if err != nil {
		return nil, c.Explain(err, "signing the nonce")
	}
	t, err := ForgeTenant(c.ClusterID, key, sig, pTN, p.ProxyURL)
	if err != nil {
		return nil, c.Explain(err, "generating the Tenant")
	}
	var errSigned, errApply error
	var wg sync.WaitGroup
	wg.Go(func() { errSigned = EnsureSignedNonce(ctx, c, cTN, pr.ClusterID, nonce, sig) })
	wg.Go(func() { errApply = ApplyTenant(ctx, pr, t) })
	wg.Wait()
	if errSigned != nil {
		return nil, errSigned
	}
	c.Report.Info("Signed nonce secret ensured")
	c.Report.Info("Nonce is signed")
	c.Report.Info("Signed nonce retrieved")
	c.Report.Info("Tenant correctly generated")
	if errApply != nil {
		return nil, errApply
	}
	pr.Report.Info("Tenant correctly applied on provider cluster")
	return p.waitTenantFilled(ctx, t)
}

// exchangeThroughLiqo is the end of exchange when Liqo's controllers run on the consumer:
// they sign the nonce written there, and the Tenant waits for that signature.
func (p *Pair) exchangeThroughLiqo(ctx context.Context, key crypto.Signer, nonce, cTN, pTN string) (*authv1beta1.Tenant, error) {
	c, pr := p.Consumer, p.Provider
	if err := EnsureSignedNonce(ctx, c, cTN, pr.ClusterID, nonce, nil); err != nil {
		return nil, err
	}
	c.Report.Info("Signed nonce secret ensured")
	sig, err := WaitSignedNonce(ctx, c, cTN, nonce)
	if err != nil {
		return nil, err
	}
	c.Report.Info("Nonce is signed")
	c.Report.Info("Signed nonce retrieved")
	t, err := ForgeTenant(c.ClusterID, key, sig, pTN, p.ProxyURL)
	if err != nil {
		return nil, c.Explain(err, "generating the Tenant")
	}
	c.Report.Info("Tenant correctly generated")
	if err := ApplyTenant(ctx, pr, t); err != nil {
		return nil, err
	}
	pr.Report.Info("Tenant correctly applied on provider cluster")
	return p.waitTenantFilled(ctx, t)
}

// waitTenantFilled waits for the provider's answer to the Tenant t just applied, and says
// so.
func (p *Pair) waitTenantFilled(ctx context.Context, t *authv1beta1.Tenant) (*authv1beta1.Tenant, error) {
	t, err := p.waitTenant(ctx, t)
	if err != nil {
		return nil, err
	}
	p.Provider.Report.Info("Tenant status is filled")
	return t, nil
}

// waitTenant waits for the provider's answer to the Tenant t (as applied, or its namespace
// and name): this project's acceptance and certificate, or, from Liqo's controllers, a
// certificate for the consumer's key.
func (p *Pair) waitTenant(ctx context.Context, t *authv1beta1.Tenant) (*authv1beta1.Tenant, error) {
	k, err := p.Consumer.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	return p.Provider.Controllers().WaitTenant(withApprovalWait(ctx, p.WaitForApproval), p.Provider, t, k.Public(), p.Consumer.ClusterID, p.now())
}

// checkAdminState refuses early what the provider's administrator decided, by the state in
// force (the stricter of the provider's record rec and the Tenant t's spec, either may be
// nil): a Drained tenant gets nothing, a Cordoned one no new certificate. The record
// outlives the Tenant, so deleting the Tenant does not take a decision back.
func checkAdminState(t *authv1beta1.Tenant, rec *cluster.TenantRecord, consumerID string) error {
	var spec authv1beta1.TenantCondition
	if t != nil {
		spec = t.Spec.TenantCondition
	}
	switch cluster.StateInForce(rec, spec) {
	case authv1beta1.TenantConditionDrained:
		return ScopedErrorf(Remote, "the provider's administrator drained cluster %q: it gets no access until they run liqoctl uncordon tenant %s", consumerID, consumerID)
	case authv1beta1.TenantConditionCordoned:
		if t == nil || t.Status.Certificate == nil {
			return ScopedErrorf(Remote, "the provider's administrator cordoned cluster %q: it gets no new certificate until they run liqoctl uncordon tenant %s", consumerID, consumerID)
		}
	}
	return nil
}

// notedRecord is the consumer's tenant record of the provider, as it was read when the
// consumer's tenant namespace was ensured, earlier in this command (nil: none, or a Liqo
// consumer, which keeps no record of this project's; then pinProviderOnce reads the
// record itself).
func (p *Pair) notedRecord() *cluster.TenantRecord {
	c, pr := p.Consumer, p.Provider
	if c.Controllers().Liqo() {
		return nil
	}
	if rec, ok := c.notedRecord(pr.ClusterID); ok {
		return rec
	}
	return nil
}

// pinProviderOnce records in the consumer's tenant record the fingerprint of the CA the
// provider presented and the proxy this run reaches it through, so that a later Identity
// presenting another CA or proxy is refused. It has nothing to do when the record read
// earlier in the command (noted) pins both already: only the administrator and the
// manager write the record, and neither unpins in the course of a handshake; otherwise
// its write starts from that record as read, without reading it again (a version that
// changed since conflicts and is decided on a live read). A different existing pin is an
// error, before any write when noted shows it: a provider CA does not change silently,
// nor does this cluster's way to it.
func pinProviderOnce(ctx context.Context, c *Side, providerID string, ca []byte, proxy, providerNS string, noted *cluster.TenantRecord) error {
	fp, err := authn.CAFingerprint(ca)
	if err != nil {
		return ScopedErrorf(Remote, "the provider's CA is not valid: %w", err)
	}
	source := "the provider now presents CA " + fp
	switch {
	case noted == nil:
	case noted.CAFingerprint != "" && noted.CAFingerprint != fp:
		return caPinMismatch(c, providerID, noted.CAFingerprint, fp, source)
	case noted.PinnedByManager:
	case providerNS != "" && noted.CheckProviderNamespace(providerNS) != nil:
		return fmt.Errorf("%s%w", c.prefix(), noted.CheckProviderNamespace(providerNS))
	case noted.CAFingerprint == fp && noted.ProxyURL != nil && *noted.ProxyURL == proxy && noted.ProviderTenantNamespace == providerNS:
		return nil
	}
	return pinRecord(ctx, c, providerID, fp, source, &proxy, providerNS, noted, true)
}

// PinProxy records proxy ("" for none) as the only proxy an Identity of provider
// providerID may reach it through on the consumer c (see PinCAFingerprint), providerNS as
// this cluster's tenant namespace there and, when fp is not "" (source says where it comes
// from), fp as the only provider CA fingerprint, in one write; a different pin already
// there of any of them is refused before anything is written (ErrProxyChanged,
// cluster.ErrTenantNamespaceNotPinned, another CA). With replace (providerNS is the
// provider's administrator's word: liqoctl generate tenant --remote-tenant-namespace), a
// tenant namespace and proxy the manager pinned as its guess (PinnedByManager) are
// replaced, as liqoctl authenticate replaces them with the provider's own.
func PinProxy(ctx context.Context, c *Side, providerID, fp, source, proxy, providerNS string, replace bool) error {
	if fp != "" {
		if err := authn.ValidateFingerprint(fp); err != nil {
			return err
		}
	}
	return pinRecord(ctx, c, providerID, fp, source, &proxy, providerNS, nil, replace)
}

// PinCAFingerprint records fp as the only CA fingerprint an Identity of provider
// providerID may present on the consumer c. The pin lives in the tenant record in the
// Liqo namespace, where only this cluster's administrator and its manager write. A
// different pin already there is refused; source says where fp comes from ("the provider
// now presents CA X", "--expect-fingerprint gives X"), and the error gives the command
// that forgets the old pin, for when the provider's CA really changed.
func PinCAFingerprint(ctx context.Context, c *Side, providerID, fp, source string) error {
	if err := authn.ValidateFingerprint(fp); err != nil {
		return err
	}
	return pinRecord(ctx, c, providerID, fp, source, nil, "", nil, false)
}

// pinRecord pins, in one write of the consumer's tenant record of providerID, the CA
// fingerprint fp (none when ""), the proxy (none when nil) and this cluster's tenant
// namespace on the provider providerNS (none when ""), where nothing is pinned yet; a
// different pin already there of any of them is refused before anything is written (a
// refused run changes nothing; source says where fp comes from). The write starts from the
// record as the command read it (noted; nil: read it now), and a refusal is decided again
// on a live read.
// With replace (liqoctl authenticate, which has the provider's own word for the
// namespace, or generate tenant with its administrator's), a tenant namespace and proxy the manager pinned for a Peering's legacy
// peering (PinnedByManager) are replaced rather than checked.
func pinRecord(ctx context.Context, c *Side, providerID, fp, source string, proxy *string, providerNS string, noted *cluster.TenantRecord, replace bool) error {
	var pinned string
	err := cluster.UpdateTenantRecordAsRead(ctx, c.Client, noted, c.Namespace, providerID, false, func(r *cluster.TenantRecord) error {
		pinned = r.CAFingerprint
		if replace && r.PinnedByManager && proxy != nil && providerNS != "" {
			r.ProxyURL, r.ProviderTenantNamespace, r.PinnedByManager = nil, "", false
		}
		if err := checkPins(c.Namespace, r, fp, proxy, providerNS); err != nil {
			return err
		}
		pinUnset(r, fp, proxy, providerNS)
		return nil
	})
	switch {
	case errors.Is(err, errCAPinned):
		return caPinMismatch(c, providerID, pinned, fp, source)
	case errors.Is(err, cluster.ErrTenantNamespaceNotPinned), errors.Is(err, cluster.ErrProxyNotPinned):
		return fmt.Errorf("%s%w", c.prefix(), err)
	case err != nil:
		return c.Explain(err, "pinning the provider CA and proxy")
	}
	return nil
}

// errCAPinned is checkPins' refusal of another CA fingerprint than the pinned one, which
// pinRecord turns into caPinMismatch's advice.
var errCAPinned = errors.New("another CA fingerprint is pinned")

// checkPins says why r may not take the pins given (fp "", proxy nil, providerNS "": none
// given): another tenant namespace, proxy or CA fingerprint pinned already, in that order.
func checkPins(liqoNS string, r *cluster.TenantRecord, fp string, proxy *string, providerNS string) error {
	if providerNS != "" {
		if err := r.CheckProviderNamespace(providerNS); err != nil {
			return err
		}
	}
	if proxy != nil {
		if err := r.CheckPinnedProxy(liqoNS, *proxy); err != nil {
			return err
		}
	}
	if fp != "" && r.CAFingerprint != "" && r.CAFingerprint != fp {
		return errCAPinned
	}
	return nil
}

// pinUnset pins in r, of the CA fingerprint fp, the proxy and the tenant namespace
// providerNS, those given ("", nil: none) where r pins none yet.
func pinUnset(r *cluster.TenantRecord, fp string, proxy *string, providerNS string) {
	if r.CAFingerprint == "" && fp != "" {
		r.CAFingerprint = fp
	}
	if r.ProxyURL == nil && proxy != nil {
		r.ProxyURL = ptr.To(*proxy)
	}
	if r.ProviderTenantNamespace == "" {
		r.ProviderTenantNamespace = providerNS
	}
	if proxy != nil || providerNS != "" {
		r.PinnedOnce = true
	}
}

// caPinMismatch is the refusal of CA fingerprint fp (source says where it comes from) on
// the consumer c, which pinned another for providerID. Its advice replaces the pin once
// the provider's administrator confirmed the new CA: removing it instead would let the
// next Identity the manager accepts, whoever wrote it (the old one included), choose.
func caPinMismatch(c *Side, providerID, pinned, fp, source string) error {
	return fmt.Errorf("%sthis cluster pinned CA %s for provider %q earlier, and %s: %s, and re-run the command",
		c.prefix(), pinned, providerID, source, cluster.RepinCAAdvice(c.Namespace, providerID, fp))
}

// certValid reports whether the Tenant publishes a certificate that is valid at now.
func certValid(t *authv1beta1.Tenant, now time.Time) bool {
	c := t.Status.Certificate
	return c != nil && c.NotAfter != nil && now.Before(c.NotAfter.Time) && t.Status.AuthParams.HasCertificate()
}
