package info

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

// SchemaVersion names the schema of liqoctl info -o json|yaml (docs/operations.md). Within
// a version, fields are only added: every list is present (empty rather than null), and
// every field is a value, a time (RFC 3339) or a reason; the sentences are the table's.
const SchemaVersion = "info.liqo-auth.io/v1"

// Report is what liqoctl info says about a cluster.
type Report struct {
	APIVersion     string  `json:"apiVersion"`
	ClusterID      string  `json:"clusterID"`
	KeyFingerprint string  `json:"keyFingerprint"`
	Manager        Manager `json:"manager"`
	// APIServer and CAFingerprint are what consumers reach this cluster with: the CA
	// fingerprint is what liqoctl generate tenant --expect-fingerprint pins (empty when
	// the kubeconfig names no CA).
	APIServer     string `json:"apiServer,omitempty"`
	CAFingerprint string `json:"caFingerprint,omitempty"`
	// Tenants are this cluster's consumers; Identities the providers it consumes.
	Tenants    []Entry `json:"tenants"`
	Identities []Entry `json:"identities"`
	// Certificates are those this cluster, as a provider, issued and that have not
	// expired: Kubernetes cannot revoke them, so they are listed until they expire.
	Certificates []Certificate `json:"certificates"`
	// PeeringUsers are those this cluster, as a provider, issued to consumers.
	PeeringUsers []handshake.PeeringUser `json:"peeringUsers"`
	// ResourceSlices are the slices this cluster asked of providers and those consumers
	// asked of it.
	ResourceSlices []Slice `json:"resourceSlices"`
	// Approvals are, on a provider, the consumers whose key waits for its administrator's
	// approval, or that they denied.
	Approvals []Approval `json:"approvals"`
	// KeyRotation is this cluster's key rotation while one is under way (liqoctl rotate
	// key): its phase and each peer's progress; absent otherwise.
	KeyRotation *rotation.Status `json:"keyRotation,omitempty"`
}

// States of the manager in Report.
const (
	ManagerRunning = "Running"
	ManagerAbsent  = "Absent"
	ManagerUnknown = "Unknown"
)

// Manager says whether a liqo-auth-manager runs for this cluster (holds its Lease).
type Manager struct {
	State   string `json:"state"`
	Holder  string `json:"holder,omitempty"`
	Version string `json:"version,omitempty"`
	// StaleSince is, when State is Absent but a manager held the Lease, when the Lease
	// expired: the manager stopped renewing it then.
	StaleSince *time.Time `json:"staleSince,omitempty"`
	// Deployment is the manager's Deployment in the Liqo namespace, when there is one.
	Deployment *Deployment `json:"deployment,omitempty"`
	detail     string
}

// Slice is one ResourceSlice, asked of a provider (Role consumer) or given to a consumer
// (Role provider).
type Slice struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Role      string `json:"role"`
	Cluster   string `json:"cluster"`
	// State is Accepted, Denied or Pending; Reason the reason of a denial.
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"`
	Resources string     `json:"resources"`
	Expires   *time.Time `json:"expires,omitempty"`
	decision  string
}

// Certificate is an unexpired client certificate this provider issued.
type Certificate struct {
	Cluster        string    `json:"cluster"`
	Serial         string    `json:"serial"`
	KeyFingerprint string    `json:"keyFingerprint,omitempty"`
	Slice          string    `json:"slice,omitempty"`
	Expires        time.Time `json:"expires"`
	// Authorizes says whether it authorizes anything now: the tenant's access is granted
	// (a slice's while the slice exists).
	Authorizes bool `json:"authorizes"`
	words      string
}

// Entry is one peer: a Tenant (a consumer of this cluster) or an Identity (a provider).
type Entry struct {
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	// Type is an Identity's (ControlPlane or ResourceSlice); empty for a Tenant.
	Type string `json:"type,omitempty"`
	// State is a Tenant's administrative state in force (Active, Cordoned, Drained), an
	// Identity's Valid or Expired, or the step a half-done handshake waits at
	// (NonceIssued, TenantGenerated).
	State string `json:"state"`
	Ready bool   `json:"ready"`
	// Reason is the reason of the Ready condition ("" before any controller wrote it).
	Reason      string               `json:"reason,omitempty"`
	Serial      string               `json:"serial,omitempty"`
	Expires     *time.Time           `json:"expires,omitempty"`
	LastRenewal *time.Time           `json:"lastRenewal,omitempty"`
	LastRefusal *authv1beta1.Refusal `json:"lastRefusal,omitempty"`
	next        string
}

func build(ctx context.Context, s *handshake.Side, now time.Time) (*Report, error) {
	r := &Report{APIVersion: SchemaVersion, ClusterID: s.ClusterID,
		Tenants: []Entry{}, Identities: []Entry{}, Certificates: []Certificate{}, ResourceSlices: []Slice{}, Approvals: []Approval{}}
	key, err := s.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	if r.KeyFingerprint, err = authn.Fingerprint(key.Public()); err != nil {
		return nil, err
	}
	r.Manager = manager(ctx, s, now)
	if r.APIServer, r.CAFingerprint, err = providerCA(ctx, s); err != nil {
		return nil, err
	}
	// Only objects in the designated tenant namespace of the peer they name are read:
	// whoever may write in another namespace must not add a peer to this report.
	in := &reader{}
	if in.designated, err = s.Controllers().TenantNamespaces(ctx, s); err != nil {
		return nil, s.Explain(err, "reading the tenant namespaces")
	}
	seen := map[string]bool{}
	placed, err := readTenants(ctx, s, in, r, seen, now)
	if err != nil {
		return nil, err
	}
	if err = readIdentities(ctx, s, in, r, seen, now); err != nil {
		return nil, err
	}
	records, err := cluster.ListTenantRecords(ctx, s.Client, s.Namespace)
	if err != nil {
		return nil, s.Explain(err, "reading the tenant records")
	}
	if r.ResourceSlices, err = slices(ctx, s, in, records); err != nil {
		return nil, err
	}
	issued(r, placed, records, now)
	if r.Approvals, err = approvals(ctx, s, key.Public(), placed, records); err != nil {
		return nil, err
	}
	if r.KeyRotation, err = keyRotation(ctx, s, now); err != nil {
		return nil, err
	}
	if r.PeeringUsers, err = handshake.ListPeeringUsers(ctx, s, now); err != nil {
		return nil, err
	}
	if r.PeeringUsers == nil {
		r.PeeringUsers = []handshake.PeeringUser{}
	}
	if err := halfDone(ctx, s, r, seen, in); err != nil {
		return nil, err
	}
	if in.ignored > 0 {
		s.Report.Warn("%d objects naming a peer outside the tenant namespace this cluster designated for it were ignored (Tenants, Identities, ResourceSlices, nonce Secrets: whoever may write in another namespace can create them; only the tenant records decide)", in.ignored)
	}
	return r, nil
}

// readTenants adds to r the Tenants in their designated namespace, marks them seen and
// returns them.
func readTenants(ctx context.Context, s *handshake.Side, in *reader, r *Report, seen map[string]bool, now time.Time) ([]authv1beta1.Tenant, error) {
	var tenants authv1beta1.TenantList
	if err := s.Client.List(ctx, &tenants); err != nil {
		return nil, err
	}
	var placed []authv1beta1.Tenant
	for i := range tenants.Items {
		t := &tenants.Items[i]
		if !in.keep(t.Namespace, string(t.Spec.ClusterID)) {
			continue
		}
		placed = append(placed, *t)
		seen["t/"+t.Namespace] = true
		r.Tenants = append(r.Tenants, tenantEntry(t, now))
	}
	return placed, nil
}

// readIdentities adds to r the Identities in their designated namespace and marks them
// seen.
func readIdentities(ctx context.Context, s *handshake.Side, in *reader, r *Report, seen map[string]bool, now time.Time) error {
	var ids authv1beta1.IdentityList
	if err := s.Client.List(ctx, &ids); err != nil {
		return err
	}
	for i := range ids.Items {
		id := &ids.Items[i]
		if !in.keep(id.Namespace, string(id.Spec.ClusterID)) {
			continue
		}
		seen["i/"+id.Namespace] = true
		e := identityEntry(id, now)
		if err := noKubeconfig(ctx, s, id, &e); err != nil {
			return err
		}
		r.Identities = append(r.Identities, e)
	}
	return nil
}

// reader keeps the objects of designated tenant namespaces and counts the others.
type reader struct {
	designated cluster.TenantNamespaces
	ignored    int
}

// keep reports whether an object in ns naming remoteID is in remoteID's tenant namespace.
func (in *reader) keep(ns, remoteID string) bool {
	if in.designated.Holds(ns, remoteID) {
		return true
	}
	in.ignored++
	return false
}

// issued lists the unexpired certificates of the tenant records, and whether a Tenant's
// access makes them authorize anything now.
func issued(r *Report, tenants []authv1beta1.Tenant, records []*cluster.TenantRecord, now time.Time) {
	sliceExists := map[string]bool{}
	for _, rs := range r.ResourceSlices {
		if rs.Role == "provider" && rs.State == sliceAccepted {
			sliceExists[rs.Namespace+"/"+rs.Name] = true
		}
	}
	for _, rec := range records {
		authorizes, granted := fmt.Sprintf("nothing now; a new handshake for cluster ID %q would re-enable it until it expires", rec.RemoteID), false
		for i := range tenants {
			t := &tenants[i]
			if string(t.Spec.ClusterID) == rec.RemoteID && t.Namespace == rec.Namespace &&
				meta.IsStatusConditionTrue(t.Status.Conditions, authv1beta1.ConditionAccessGranted) {
				authorizes, granted = fmt.Sprintf("the access of Tenant %s/%s (user %q)", t.Namespace, t.Name, rec.RemoteID), true
			}
		}
		for _, c := range rec.Valid(now) {
			cert := Certificate{Cluster: rec.RemoteID, Serial: c.Serial, KeyFingerprint: c.KeyFingerprint, Slice: c.Slice, Expires: c.NotAfter.UTC(), Authorizes: granted, words: authorizes}
			if c.Slice != "" {
				cert.words = fmt.Sprintf("what ResourceSlice %s/%s grants (user %q), while it exists", rec.Namespace, c.Slice, authn.SliceUserName(c.Slice, rec.RemoteID))
				cert.Authorizes = sliceExists[rec.Namespace+"/"+c.Slice]
			}
			r.Certificates = append(r.Certificates, cert)
		}
	}
}

func tenantEntry(t *authv1beta1.Tenant, now time.Time) Entry {
	state := t.Status.TenantCondition // in force: the provider's record may be stricter than the spec
	if state == "" {
		state = t.Spec.TenantCondition
	}
	e, expired := entry(t.Namespace, string(t.Spec.ClusterID), string(state), t.Status.Conditions, t.Status.Certificate, now)
	if expired {
		e.next = "the consumer's certificate expired: it must run liqoctl authenticate again"
	}
	e.LastRenewal, e.LastRefusal = timeOf(t.Status.LastRenewal), t.Status.LastRefusal
	return e
}

func identityEntry(id *authv1beta1.Identity, now time.Time) Entry {
	e, expired := entry(id.Namespace, string(id.Spec.ClusterID), identityValid, id.Status.Conditions, id.Status.Certificate, now)
	e.Type = string(id.Spec.Type)
	if expired {
		e.Ready, e.State = false, identityExpired
		e.next = fmt.Sprintf("EXPIRED at %s: run liqoctl authenticate --remote-kubeconfig <provider> again", e.Expires.Format(time.RFC3339))
	}
	e.LastRenewal, e.LastRefusal = timeOf(id.Status.LastRenewal), id.Status.LastRefusal
	return e
}

// noKubeconfig marks an Identity whose kubeconfig Secret does not exist: it is not usable
// on this cluster, whatever its certificate says (after a manual flow with no consumer
// controller running, nothing writes it).
func noKubeconfig(ctx context.Context, s *handshake.Side, id *authv1beta1.Identity, e *Entry) error {
	if e.State != identityValid {
		return nil
	}
	name := handshake.KubeconfigSecret(id)
	var sec corev1.Secret
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: name}, &sec)
	if err == nil && len(sec.Data[wire.KubeconfigField]) > 0 {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	e.State, e.Ready = identityNoKubeconfig, false
	e.next = fmt.Sprintf("no kubeconfig Secret %s/%s: no consumer controller has processed the Identity; run liqo-auth-manager here (liqoctl install --with-manager), or liqoctl authenticate --remote-kubeconfig <provider>", id.Namespace, name)
	return nil
}

// entry is a peer's line: its readiness and certificate, and the hint of its Ready
// condition when it is not ready; expired says its certificate has expired.
func entry(ns, cluster, state string, conds []metav1.Condition, cert *authv1beta1.CertificateInfo, now time.Time) (e Entry, expired bool) {
	e = Entry{Namespace: ns, Cluster: cluster, State: state, Ready: meta.IsStatusConditionTrue(conds, authv1beta1.ConditionReady)}
	if c := meta.FindStatusCondition(conds, authv1beta1.ConditionReady); c != nil {
		e.Reason = c.Reason
	}
	if cert != nil {
		e.Serial, e.Expires = cert.SerialNumber, timeOf(cert.NotAfter)
	}
	if e.Expires != nil && now.After(*e.Expires) {
		return e, true
	}
	if !e.Ready {
		e.next = conditionHint(conds)
	}
	return e, false
}

func conditionHint(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, authv1beta1.ConditionReady); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "not processed yet: is liqo-auth-manager running?"
}

// halfDone reports tenant namespaces where a handshake started but did not finish.
func halfDone(ctx context.Context, s *handshake.Side, r *Report, seen map[string]bool, in *reader) error {
	var secrets corev1.SecretList
	if err := s.Client.List(ctx, &secrets, client.HasLabels{wire.RemoteClusterIDLabel}); err != nil {
		return err
	}
	for _, sec := range secrets.Items {
		remote := sec.Labels[wire.RemoteClusterIDLabel]
		if (sec.Name != wire.NonceSecretName && sec.Name != wire.SignedNonceSecretName) || !in.keep(sec.Namespace, remote) {
			continue
		}
		switch {
		case sec.Name == wire.NonceSecretName && sec.Labels[wire.NonceLabel] == "true" && !seen["t/"+sec.Namespace]:
			r.Tenants = append(r.Tenants, Entry{Namespace: sec.Namespace, Cluster: remote, State: "NonceIssued",
				next: fmt.Sprintf("waiting for the consumer's Tenant: on %s, liqoctl generate tenant --remote-cluster-id %s --nonce <nonce>, then kubectl apply it here", remote, r.ClusterID)})
		case sec.Name == wire.SignedNonceSecretName && sec.Labels[wire.SignedNonceLabel] == "true" && !seen["i/"+sec.Namespace]:
			r.Identities = append(r.Identities, Entry{Namespace: sec.Namespace, Cluster: remote, State: "TenantGenerated",
				next: fmt.Sprintf("waiting for the provider's Identity: on %s, kubectl apply the Tenant and liqoctl generate identity --remote-cluster-id %s, then kubectl apply it here", remote, r.ClusterID)})
		}
	}
	return nil
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// slices lists the ResourceSlices of the cluster, on either side.
// slices lists the slices of designated tenant namespaces. The namespace names the peer,
// whatever a slice's labels say (a slice writer may change them): a provider's copy there
// is listed only when it names that peer as its consumer, and its expiry is the one this
// provider recorded when it issued the certificate (records), never its status; any other
// slice there was asked of that peer.
func slices(ctx context.Context, s *handshake.Side, in *reader, records []*cluster.TenantRecord) ([]Slice, error) {
	var list authv1beta1.ResourceSliceList
	if err := s.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := []Slice{}
	for i := range list.Items {
		rs := &list.Items[i]
		peer := in.designated[rs.Namespace]
		consumer, providerCopy := access.SliceConsumer(rs)
		e := Slice{Name: rs.Name, Namespace: rs.Namespace, Resources: authv1beta1.FormatResources(rs.Spec.Resources), Cluster: peer}
		switch {
		case peer == "" || providerCopy && consumer != peer:
			in.ignored++
			continue
		case providerCopy:
			e.Role, e.Expires = "provider", recordedExpiry(records, peer, rs.Name)
		default:
			e.Role, e.Expires = "consumer", certExpiry(rs.Status.Certificate)
		}
		switch accepted, denied := authv1beta1.SliceVerdict(rs.Status.Conditions); {
		case denied != nil:
			e.State, e.Reason, e.decision = sliceDenied, denied.Reason, "Denied: "+handshake.SliceDecision(rs)
		case accepted:
			e.State = sliceAccepted
			e.Resources = authv1beta1.FormatResources(rs.Status.Resources)
		default:
			e.State = slicePending
		}
		out = append(out, e)
	}
	return out, nil
}

// States of an Identity, and of a ResourceSlice, in Report.
const (
	identityValid   = "Valid"
	identityExpired = "Expired"
	// identityNoKubeconfig: the Identity holds a certificate but no kubeconfig Secret
	// was written for it.
	identityNoKubeconfig = "NoKubeconfig"
	sliceAccepted        = "Accepted"
	sliceDenied          = "Denied"
	slicePending         = "Pending"
)

// recordedExpiry is when the latest certificate this provider recorded for slice of peer
// expires (nil: none).
func recordedExpiry(records []*cluster.TenantRecord, peer, slice string) *time.Time {
	var last *time.Time
	for _, rec := range records {
		if rec.RemoteID != peer {
			continue
		}
		for _, c := range rec.Certificates {
			if c.Slice == slice && (last == nil || c.NotAfter.After(*last)) {
				t := c.NotAfter.UTC()
				last = &t
			}
		}
	}
	return last
}

func certExpiry(c *authv1beta1.CertificateInfo) *time.Time {
	if c == nil || c.NotAfter == nil {
		return nil
	}
	t := c.NotAfter.UTC()
	return &t
}

// keyRotation is the state of this cluster's key rotation, nil when none is under way.
// Observing reaches each provider with this cluster's identity there (it acts on none).
func keyRotation(ctx context.Context, s *handshake.Side, now time.Time) (*rotation.Status, error) {
	ks, err := s.ClusterKeys(ctx)
	if err != nil || !ks.Rotating() {
		return nil, err
	}
	d := &rotation.Driver{Client: s.Client, Namespace: s.Namespace, ClusterID: s.ClusterID, Provider: true, Now: func() time.Time { return now }}
	st, err := d.Observe(ctx)
	if err != nil {
		return nil, s.Explain(err, "reading the key rotation")
	}
	return &st, nil
}
