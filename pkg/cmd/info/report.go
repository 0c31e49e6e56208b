package info

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/version"
)

// Report is what liqoctl info says about a cluster.
type Report struct {
	ClusterID      string  `json:"clusterID"`
	KeyFingerprint string  `json:"keyFingerprint"`
	Manager        string  `json:"manager"`
	ManagerVersion string  `json:"managerVersion,omitempty"`
	Tenants        []Entry `json:"tenants"`
	Identities     []Entry `json:"identities"`
	// Certificates are those this cluster, as a provider, issued and that have not
	// expired: Kubernetes cannot revoke them, so they are listed until they expire.
	Certificates []Certificate `json:"certificates,omitempty"`
	// PeeringUsers are those this cluster, as a provider, issued to consumers.
	PeeringUsers []handshake.PeeringUser `json:"peeringUsers,omitempty"`
	// ResourceSlices are the slices this cluster asked of providers and those consumers
	// asked of it.
	ResourceSlices []Slice `json:"resourceSlices,omitempty"`
}

// Slice is one ResourceSlice, asked of a provider (Role consumer) or given to a consumer
// (Role provider).
type Slice struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Role      string     `json:"role"`
	Cluster   string     `json:"cluster"`
	State     string     `json:"state"`
	Resources string     `json:"resources"`
	Expires   *time.Time `json:"expires,omitempty"`
}

// Certificate is an unexpired client certificate this provider issued.
type Certificate struct {
	Cluster        string    `json:"cluster"`
	Serial         string    `json:"serial"`
	KeyFingerprint string    `json:"keyFingerprint,omitempty"`
	Expires        time.Time `json:"expires"`
	Authorizes     string    `json:"authorizes"`
}

// Entry is one peer: a Tenant (a consumer of this cluster) or an Identity (a provider).
type Entry struct {
	Namespace string     `json:"namespace"`
	Cluster   string     `json:"cluster"`
	State     string     `json:"state"`
	Ready     bool       `json:"ready"`
	Serial    string     `json:"serial,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"`
	Next      string     `json:"next,omitempty"`
}

func build(ctx context.Context, s *handshake.Side, now time.Time) (*Report, error) {
	r := &Report{ClusterID: s.ClusterID, Manager: "not running: the controllers run only inside liqoctl commands, and certificates are not renewed"}
	key, err := s.ClusterKey(ctx)
	if err != nil {
		return nil, err
	}
	if r.KeyFingerprint, err = authn.Fingerprint(key.Public()); err != nil {
		return nil, err
	}
	switch running, err := authmanager.RunningManager(ctx, s.Client, s.Namespace, now); {
	case err != nil:
		r.Manager = fmt.Sprintf("unknown: its Lease %s/%s cannot be read: %v", s.Namespace, authmanager.LeaseName, err)
	case running != nil:
		r.Manager = fmt.Sprintf("running (%s), version %s", running.Holder, running.Version)
		r.ManagerVersion = running.Version
		if skew := authmanager.VersionSkew(version.Get().Version, running.Version); skew != "" {
			s.Report.Warn("%s", skew)
		}
	}
	var tenants authv1beta1.TenantList
	if err := s.Client.List(ctx, &tenants); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range tenants.Items {
		t := &tenants.Items[i]
		seen["t/"+t.Namespace] = true
		r.Tenants = append(r.Tenants, tenantEntry(t, now))
	}
	var ids authv1beta1.IdentityList
	if err := s.Client.List(ctx, &ids); err != nil {
		return nil, err
	}
	for i := range ids.Items {
		id := &ids.Items[i]
		seen["i/"+id.Namespace] = true
		r.Identities = append(r.Identities, identityEntry(id, now))
	}
	if err := issued(ctx, s, r, tenants.Items, now); err != nil {
		return nil, err
	}
	if r.PeeringUsers, err = handshake.ListPeeringUsers(ctx, s); err != nil {
		return nil, err
	}
	if r.ResourceSlices, err = slices(ctx, s); err != nil {
		return nil, err
	}
	return r, halfDone(ctx, s, r, seen)
}

// issued lists the unexpired certificates of the tenant records, and whether a Tenant's
// access makes them authorize anything now.
func issued(ctx context.Context, s *handshake.Side, r *Report, tenants []authv1beta1.Tenant, now time.Time) error {
	records, err := cluster.ListTenantRecords(ctx, s.Client, s.Namespace)
	if err != nil {
		return s.Explain(err, "reading the tenant records")
	}
	for _, rec := range records {
		authorizes := fmt.Sprintf("nothing now; a new handshake for cluster ID %q would re-enable it until it expires", rec.RemoteID)
		for i := range tenants {
			t := &tenants[i]
			if string(t.Spec.ClusterID) == rec.RemoteID && t.Namespace == rec.Namespace &&
				meta.IsStatusConditionTrue(t.Status.Conditions, authv1beta1.ConditionAccessGranted) {
				authorizes = fmt.Sprintf("the access of Tenant %s/%s (user %q)", t.Namespace, t.Name, rec.RemoteID)
			}
		}
		for _, c := range rec.Valid(now) {
			words := authorizes
			if c.Slice != "" {
				words = fmt.Sprintf("what ResourceSlice %s/%s grants (user %q), while it exists", rec.Namespace, c.Slice, authn.SliceUserName(c.Slice, rec.RemoteID))
			}
			r.Certificates = append(r.Certificates, Certificate{Cluster: rec.RemoteID, Serial: c.Serial, KeyFingerprint: c.KeyFingerprint, Expires: c.NotAfter.UTC(), Authorizes: words})
		}
	}
	return nil
}

func tenantEntry(t *authv1beta1.Tenant, now time.Time) Entry {
	state := t.Status.TenantCondition // in force: the provider's record may be stricter than the spec
	if state == "" {
		state = t.Spec.TenantCondition
	}
	e, expired := entry(t.Namespace, string(t.Spec.ClusterID), string(state), t.Status.Conditions, t.Status.Certificate, now)
	if expired {
		e.Next = "the consumer's certificate expired: it must run liqoctl authenticate again"
	}
	return e
}

func identityEntry(id *authv1beta1.Identity, now time.Time) Entry {
	e, expired := entry(id.Namespace, string(id.Spec.ClusterID), string(id.Spec.Type), id.Status.Conditions, id.Status.Certificate, now)
	if expired {
		e.Ready = false
		e.Next = fmt.Sprintf("EXPIRED at %s: run liqoctl authenticate --remote-kubeconfig <provider> again", e.Expires.Format(time.RFC3339))
	}
	return e
}

// entry is a peer's line: its readiness and certificate, and the hint of its Ready
// condition when it is not ready; expired says its certificate has expired.
func entry(ns, cluster, state string, conds []metav1.Condition, cert *authv1beta1.CertificateInfo, now time.Time) (e Entry, expired bool) {
	e = Entry{Namespace: ns, Cluster: cluster, State: state, Ready: meta.IsStatusConditionTrue(conds, authv1beta1.ConditionReady)}
	if cert != nil {
		e.Serial, e.Expires = cert.SerialNumber, timeOf(cert.NotAfter)
	}
	if e.Expires != nil && now.After(*e.Expires) {
		return e, true
	}
	if !e.Ready {
		e.Next = conditionHint(conds)
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
func halfDone(ctx context.Context, s *handshake.Side, r *Report, seen map[string]bool) error {
	var secrets corev1.SecretList
	if err := s.Client.List(ctx, &secrets, client.HasLabels{wire.RemoteClusterIDLabel}); err != nil {
		return err
	}
	for _, sec := range secrets.Items {
		remote := sec.Labels[wire.RemoteClusterIDLabel]
		switch {
		case sec.Name == wire.NonceSecretName && sec.Labels[wire.NonceLabel] == "true" && !seen["t/"+sec.Namespace]:
			r.Tenants = append(r.Tenants, Entry{Namespace: sec.Namespace, Cluster: remote, State: "NonceIssued",
				Next: fmt.Sprintf("waiting for the consumer's Tenant: on %s, liqoctl generate tenant --remote-cluster-id %s --nonce <nonce>, then kubectl apply it here", remote, r.ClusterID)})
		case sec.Name == wire.SignedNonceSecretName && sec.Labels[wire.SignedNonceLabel] == "true" && !seen["i/"+sec.Namespace]:
			r.Identities = append(r.Identities, Entry{Namespace: sec.Namespace, Cluster: remote, State: "TenantGenerated",
				Next: fmt.Sprintf("waiting for the provider's Identity: on %s, kubectl apply the Tenant and liqoctl generate identity --remote-cluster-id %s, then kubectl apply it here", remote, r.ClusterID)})
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
func slices(ctx context.Context, s *handshake.Side) ([]Slice, error) {
	var list authv1beta1.ResourceSliceList
	if err := s.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []Slice
	for i := range list.Items {
		rs := &list.Items[i]
		e := Slice{Name: rs.Name, Namespace: rs.Namespace, Resources: authv1beta1.FormatResources(rs.Spec.Resources), Expires: certExpiry(rs.Status.Certificate)}
		switch {
		case rs.Labels[wire.ReplicationRequestedLabel] == "true":
			e.Role, e.Cluster = "consumer", rs.Labels[wire.RemoteClusterIDLabel]
		case rs.Labels[wire.ReplicationStatusLabel] == "true":
			e.Role, e.Cluster = "provider", rs.Labels[wire.RemoteClusterIDLabel]
			if rs.Spec.ConsumerClusterID != nil {
				e.Cluster = string(*rs.Spec.ConsumerClusterID)
			}
		default:
			continue
		}
		switch accepted, denied := authv1beta1.SliceVerdict(rs.Status.Conditions); {
		case denied != nil:
			e.State = "Denied: " + handshake.SliceDecision(rs)
		case accepted:
			e.State = "Accepted"
			e.Resources = authv1beta1.FormatResources(rs.Status.Resources)
		default:
			e.State = "Pending"
		}
		out = append(out, e)
	}
	return out, nil
}

func certExpiry(c *authv1beta1.CertificateInfo) *time.Time {
	if c == nil || c.NotAfter == nil {
		return nil
	}
	t := c.NotAfter.UTC()
	return &t
}
