// Package metrics is what liqo-auth-manager tells Prometheus about its peerings: counters
// the controllers increment as they decide (handshakes accepted and refused, certificates
// issued and renewed, renewals that failed), and gauges read from the manager's cache at
// each scrape (certificate expiry and readiness per peer and slice, age of unused nonces).
//
// Who writes what the gauges read: Tenant and provider-side ResourceSlice status only the
// manager (a tenant may read them, not write them); Identities the consumer's own
// administrators; nonces the manager, or a peering user for its own. Label values are
// cluster IDs and slice names, which the API schema bounds, and only objects this manager
// accepted or created in a tenant namespace named for their peer are reported, so that no
// namespace writer can add series.
package metrics

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Names of the metrics, documented in docs/operations.md.
const (
	HandshakesName     = "liqo_auth_handshakes_total"
	CertificatesName   = "liqo_auth_certificates_total"
	ExpiryName         = "liqo_auth_certificate_expiry_timestamp_seconds"
	ReadyName          = "liqo_auth_peer_ready"
	NonceAgeName       = "liqo_auth_nonce_age_seconds"
	ResultAccepted     = "accepted"
	ResultRefused      = "refused"
	OutcomeIssued      = "issued"
	OutcomeRenewed     = "renewed"
	OutcomeFailed      = "failed"
	KindControlPlane   = "controlplane"
	KindResourceSlice  = "resourceslice"
	SideProvider       = "provider"
	SideConsumer       = "consumer"
	collectTimeout     = 5 * time.Second
	unknownReasonLabel = "Unknown"
)

// Metrics are the counters of one manager. A nil *Metrics counts nothing: the controllers
// that liqoctl runs for the length of one command serve no metrics.
type Metrics struct {
	handshakes   *prometheus.CounterVec
	certificates *prometheus.CounterVec
}

// New returns the counters, registered with nothing yet.
func New() *Metrics {
	return &Metrics{
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: HandshakesName,
			Help: "Handshakes the provider decided, by result (accepted, refused) and reason (the reason of the Tenant's Authenticated condition)."},
			[]string{"result", "reason"}),
		certificates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: CertificatesName,
			Help: "Client certificates the provider issued for the first time, renewed, or failed to issue or renew, by kind (controlplane, resourceslice) and outcome (issued, renewed, failed)."},
			[]string{"kind", "outcome"}),
	}
}

// Handshake counts a decided handshake: accepted, or refused with reason.
func (m *Metrics) Handshake(accepted bool, reason string) {
	if m == nil {
		return
	}
	result := ResultRefused
	if accepted {
		result = ResultAccepted
	}
	if reason == "" {
		reason = unknownReasonLabel
	}
	m.handshakes.WithLabelValues(result, reason).Inc()
}

// Certificate counts a certificate of kind issued (renewed when it replaced one), or a
// failure to issue or renew one.
func (m *Metrics) Certificate(kind, outcome string) {
	if m == nil {
		return
	}
	m.certificates.WithLabelValues(kind, outcome).Inc()
}

// Register registers the counters and a collector of the gauges with reg. The gauges are
// read from c at each scrape, the manager's client (its cache; a nonce the cache kept
// stripped is read whole through it, see collectNonces): as a provider (Tenants, the slices it
// gave, its nonces) when provider is set, as a consumer (Identities) when consumer is.
// Registering again in the same registry (several managers in one process) keeps the
// first counters and adds nothing.
func (m *Metrics) Register(reg prometheus.Registerer, c client.Reader, liqoNS, self string, provider, consumer bool, now func() time.Time) (err error) {
	if m.handshakes, err = register(reg, m.handshakes); err != nil {
		return err
	}
	if m.certificates, err = register(reg, m.certificates); err != nil {
		return err
	}
	_, err = register(reg, prometheus.Collector(&gauges{reader: c, liqoNS: liqoNS, self: self, provider: provider, consumer: consumer, now: now}))
	return err
}

// register registers col with reg, or returns the collector registered there already.
func register[C prometheus.Collector](reg prometheus.Registerer, col C) (C, error) {
	err := reg.Register(col)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return col, err
}

var (
	expiryDesc = prometheus.NewDesc(ExpiryName,
		"When the client certificate of a peering expires (Unix seconds): side is this cluster's (provider: it issued it; consumer: it holds it), peer the other cluster, kind controlplane or resourceslice, slice the ResourceSlice.",
		[]string{"side", "peer", "kind", "slice"}, nil)
	readyDesc = prometheus.NewDesc(ReadyName,
		"1 when the peering's Ready condition is True (a Tenant on a provider, a control-plane Identity on a consumer), 0 otherwise.",
		[]string{"side", "peer"}, nil)
	nonceAgeDesc = prometheus.NewDesc(NonceAgeName,
		"Age of a nonce this provider created that no handshake used yet, per consumer (seconds).",
		[]string{"peer"}, nil)
)

// gauges reads the state of every peering from the cache at each scrape.
type gauges struct {
	reader             client.Reader
	liqoNS             string
	self               string
	provider, consumer bool
	now                func() time.Time
}

// Describe sends the descriptions of the gauges.
func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- expiryDesc
	ch <- readyDesc
	ch <- nonceAgeDesc
}

// Collect reads the cache and sends one sample per peering, slice and unused nonce.
func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	out := &emitter{ch: ch, seen: map[string]bool{}}
	if g.provider {
		g.collectProvider(ctx, out)
	}
	if g.consumer {
		g.collectConsumer(ctx, out)
	}
}

// emitter sends each series once: two objects that claim the same peer and slice (an
// administrator's stray copy) must not fail the whole scrape with a duplicate.
type emitter struct {
	ch   chan<- prometheus.Metric
	seen map[string]bool
}

// emit sends one gauge, once per series.
func (e *emitter) emit(d *prometheus.Desc, v float64, labels ...string) {
	key := d.String() + "\x00" + strings.Join(labels, "\x00")
	if e.seen[key] {
		return
	}
	e.seen[key] = true
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...) // every series is a gauge
}

// ready is 1 when the Ready condition is True.
func ready(conds []metav1.Condition) float64 {
	for _, c := range conds {
		if c.Type == authv1beta1.ConditionReady && c.Status == metav1.ConditionTrue {
			return 1
		}
	}
	return 0
}

func (g *gauges) collectProvider(ctx context.Context, out *emitter) {
	// The tenant records say what this provider issued: the expiry series come from them,
	// not from statuses a status writer may rewrite.
	known, err := g.peers(ctx)
	if err != nil {
		return
	}
	g.collectTenants(ctx, out, known)
	g.collectProviderSlices(ctx, out, known)
	g.collectNonces(ctx, out, known)
}

// collectTenants emits, for each Tenant this provider accepted in its designated tenant
// namespace, its readiness and the expiry of the last control-plane certificate recorded.
// A failed list emits nothing.
func (g *gauges) collectTenants(ctx context.Context, out *emitter, known *peers) {
	var tenants authv1beta1.TenantList
	if err := g.reader.List(ctx, &tenants); err != nil {
		return
	}
	for i := range tenants.Items {
		t := &tenants.Items[i]
		peer := string(t.Spec.ClusterID)
		if peer == "" || !known.designated(peer, t.Namespace) || t.Status.AcceptedKeyFingerprint == "" {
			continue // not a tenant this provider accepted
		}
		out.emit(readyDesc, ready(t.Status.Conditions), SideProvider, peer)
		if at, ok := lastIssued(known.records[peer], ""); ok {
			out.emit(expiryDesc, float64(at.Unix()), SideProvider, peer, KindControlPlane, "")
		}
	}
}

// collectProviderSlices emits, for each slice given to a peer from its designated tenant
// namespace, the expiry of the last certificate recorded for it. A failed list emits
// nothing.
func (g *gauges) collectProviderSlices(ctx context.Context, out *emitter, known *peers) {
	var slices authv1beta1.ResourceSliceList
	if err := g.reader.List(ctx, &slices); err != nil {
		return
	}
	for i := range slices.Items {
		rs := &slices.Items[i]
		peer, providerCopy := access.SliceConsumer(rs)
		if !providerCopy || peer == "" || peer == g.self || !known.designated(peer, rs.Namespace) {
			continue
		}
		if at, ok := lastIssued(known.records[peer], rs.Name); ok {
			out.emit(expiryDesc, float64(at.Unix()), SideProvider, peer, KindResourceSlice, rs.Name)
		}
	}
}

// collectNonces emits the age of each unused nonce of a known peer. A failed list emits
// nothing.
func (g *gauges) collectNonces(ctx context.Context, out *emitter, known *peers) {
	var nonces corev1.SecretList
	if err := g.reader.List(ctx, &nonces, client.MatchingLabels{wire.NonceLabel: "true"}); err != nil {
		return
	}
	now := g.now()
	for i := range nonces.Items {
		s := g.whole(ctx, &nonces.Items[i], known)
		if peer, ok := unusedNonce(s, known); ok {
			out.emit(nonceAgeDesc, now.Sub(s.CreationTimestamp.Time).Seconds(), peer)
		}
	}
}

// whole returns nonce s as its content reads: s itself, or, when the cache kept it
// stripped (it reached the cache a moment before the record of its namespace, and stays
// so until it changes), what the reader reads of it by name, which the manager's client
// reads live once per version. Only the nonce Secret of a designated namespace is read
// again, one per peer: no Secret writer adds reads with Secrets of their own. A failed
// read leaves s as it is: an empty nonce, reported as none.
func (g *gauges) whole(ctx context.Context, s *corev1.Secret, known *peers) *corev1.Secret {
	if !wire.Stripped(s) || s.Name != wire.NonceSecretName || !known.designated(s.Labels[wire.RemoteClusterIDLabel], s.Namespace) {
		return s
	}
	var w corev1.Secret
	if err := g.reader.Get(ctx, client.ObjectKeyFromObject(s), &w); err != nil {
		return s
	}
	return &w
}

// peers are what the collector reports from: the tenant records, by peer, and the
// tenant namespaces they designate.
type peers struct {
	records    map[string]*cluster.TenantRecord
	namespaces cluster.TenantNamespaces
}

// peers reads the tenant records and the namespaces they designate.
func (g *gauges) peers(ctx context.Context) (*peers, error) {
	records, err := cluster.ListTenantRecords(ctx, g.reader, g.liqoNS)
	if err != nil {
		return nil, err
	}
	p := &peers{records: make(map[string]*cluster.TenantRecord, len(records))}
	for _, r := range records {
		p.records[r.RemoteID] = r
	}
	if p.namespaces, err = cluster.DesignatedBy(ctx, g.reader, records); err != nil {
		return nil, err
	}
	return p, nil
}

// designated says whether ns is the tenant namespace this cluster designated for peer
// (the recorded namespace, the same object, by its UID), and named for it: only objects
// there are reported, so that no namespace creator adds a series with a look-alike
// liqo-tenant-<peer>, nor with one re-created under a name a record still holds.
func (p *peers) designated(peer, ns string) bool {
	return peer != "" && p.namespaces[ns] == peer && ns == wire.TenantNamespaceName(peer)
}

// lastIssued is when the latest certificate the record lists for slice ("" for the
// control plane) expires: the one in use.
func lastIssued(rec *cluster.TenantRecord, slice string) (time.Time, bool) {
	var last time.Time
	if rec == nil {
		return last, false
	}
	for _, c := range rec.Certificates {
		if c.Slice == slice && c.NotAfter.After(last) {
			last = c.NotAfter
		}
	}
	return last, !last.IsZero()
}

// unusedNonce says whether s is the nonce of a peer that no handshake used yet, and of
// which peer: the Secret liqo-nonce in the tenant namespace named for the peer and
// recorded as its, holding a nonce the record does not list as consumed, in a Secret other
// than the one a handshake consumed (a value written over a consumed nonce is no new
// handshake's: a new nonce comes in a new Secret). The record,
// which no tenant writes, decides, not the Secret's annotations: a Secret writer there
// may write any (the consumed-at mark, the cache's stripped mark), and the cache keeps a
// Secret's data only in recorded tenant namespaces.
func unusedNonce(s *corev1.Secret, p *peers) (string, bool) {
	peer := s.Labels[wire.RemoteClusterIDLabel]
	rec := p.records[peer]
	nonce := string(s.Data[wire.NonceField])
	if !p.designated(peer, s.Namespace) || s.Name != wire.NonceSecretName || nonce == "" {
		return "", false
	}
	return peer, !rec.NonceUsed(nonce, string(s.UID))
}

func (g *gauges) collectConsumer(ctx context.Context, out *emitter) {
	var ids authv1beta1.IdentityList
	if err := g.reader.List(ctx, &ids); err != nil {
		return
	}
	known, err := g.peers(ctx)
	if err != nil {
		return
	}
	for i := range ids.Items {
		id := &ids.Items[i]
		peer := string(id.Spec.ClusterID)
		if peer == "" || !known.designated(peer, id.Namespace) {
			continue
		}
		kind, slice := KindControlPlane, ""
		if id.Spec.Type == authv1beta1.ResourceSliceIdentityType {
			kind, slice = KindResourceSlice, id.Labels[wire.SliceNameLabel]
		} else if id.Name == wire.IdentityName(peer) {
			out.emit(readyDesc, ready(id.Status.Conditions), SideConsumer, peer)
		}
		if c := id.Status.Certificate; c != nil && c.NotAfter != nil {
			out.emit(expiryDesc, float64(c.NotAfter.Unix()), SideConsumer, peer, kind, slice)
		}
	}
}
