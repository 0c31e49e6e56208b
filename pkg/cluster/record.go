package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// Keys of a tenant record ConfigMap.
const (
	recordNamespaceKey    = "namespace"
	recordNamespaceUIDKey = "namespaceUID"
	recordCAKey           = "caFingerprint"
	recordCertsKey        = "certificates"
	recordNonceKey        = "consumedNonce"
	recordLimitsKey       = "sliceLimits"
	recordStateKey        = "tenantCondition"
	recordPubCAKey        = "publishedCAFingerprint"
	recordPubServerKey    = "publishedAPIServer"
	recordRenewKey        = "renewSerial"
	recordPubCertKey      = "publishedCertificate"
	recordPubTenantKey    = "publishedForTenant"
	recordPeeringUserKey  = "peeringUser"
	recordPeeringKey      = "peering"
	recordApprovalKey     = "approval"
	recordKeyMoveKey      = "keyMove"
	recordProxyKey        = "proxyURL"
	recordProviderNSKey   = "providerTenantNamespace"
	recordPinnedOnceKey   = "pinnedOnce"
	recordManagerPinKey   = "pinnedByManager"
	recordSliceCopiesKey  = "sliceCopies"
)

// TenantRecord is this cluster's own account of one remote cluster. It lives in a
// ConfigMap of the Liqo namespace, where only this cluster's administrator and
// liqo-auth-manager write, and never in the tenant namespace itself, whose labels anyone
// who may create a namespace can copy:
//
//   - which namespace is the tenant namespace of the remote cluster, by name and UID (a
//     namespace deleted and re-created by someone else has another UID);
//   - on a consumer, the fingerprint of the provider CA it pinned;
//   - on a provider, the certificates it had issued to that cluster and that are not
//     expired: Kubernetes cannot revoke them, so they are listed until they expire.
type TenantRecord struct {
	RemoteID      string
	Namespace     string
	NamespaceUID  types.UID
	CAFingerprint string
	Certificates  []IssuedCertificate
	// ConsumedNonce is, on a provider, the nonce the last accepted handshake used.
	ConsumedNonce *ConsumedNonce
	// SliceLimits is, on a provider, the most the remote cluster's ResourceSlices may
	// hold together, resource by resource (none when empty): set by the provider's
	// administrator (liqoctl limit tenant).
	SliceLimits corev1.ResourceList
	// State is, on a provider, the administrative state its administrator decided for the
	// remote cluster (liqoctl cordon, uncordon, drain): "Active", "Cordoned", "Drained", or
	// "" (Active). It outlives the Tenant: deleting the Tenant and running a new handshake
	// does not reset it.
	State string
	// PublishedCAFingerprint and PublishedAPIServer are, on a provider, the CA and API
	// server URL its manager last published in the Tenant's status with a certificate.
	// Whoever may write tenants/status can rewrite what a Tenant publishes; this record,
	// which the consumer's administrator may read (a peering user too, by name), says what
	// the provider itself published, and the serials of Certificates which certificates.
	PublishedCAFingerprint string
	PublishedAPIServer     string
	// PublishedCertificate is, on a provider, the control-plane certificate (PEM) its
	// manager last published in the Tenant's status: what it puts back, instead of issuing
	// a new one, when a status writer replaces it.
	PublishedCertificate string
	// PublishedForTenant is the UID of the Tenant that PublishedCertificate was published
	// in: only that Tenant gets it back (a Tenant re-created for the same key gets a
	// certificate of its own).
	PublishedForTenant string
	// PeeringUser is, on a provider, the peering user its administrator generated for the
	// remote cluster (liqoctl generate peering-user), until they delete it: what says that
	// one exists, where no ClusterRole(Binding) writer can forge or hide one.
	PeeringUser *RecordedPeeringUser
	// RenewSerial is, on a provider, the serial of the control-plane certificate its
	// administrator asked to replace now (liqoctl renew tenant): the manager renews it
	// ahead of time while the Tenant publishes that serial.
	RenewSerial string
	// ProxyURL is, on a consumer, the proxy this cluster reaches the remote provider
	// through ("" for none), pinned by a handshake (liqoctl authenticate or generate
	// tenant, a Peering), never by a controller from an Identity; nil while none is pinned
	// (a peering older than the pin, until its next authenticate), and again once the
	// peering's control-plane Identity is removed (unauthenticate, leave: ForgetProxy). An
	// Identity of that provider,
	// control-plane or slice, with another proxy is refused: the proxy is this cluster's
	// choice, never the provider's (whose Tenant and its status others may write) nor an
	// Identity writer's.
	ProxyURL *string
	// ProviderTenantNamespace is, on a consumer, this cluster's tenant namespace on the
	// remote provider, where its slices' copies are and their grants with them: pinned
	// beside ProxyURL by a handshake (liqoctl authenticate, generate tenant, a Peering),
	// never by a controller, and forgotten with it ("" while none is pinned). The
	// Identities' spec.namespace is their writers' (helper-39's F7): the consumer's slice
	// controller writes copies, and a slice's deletion proves the revocation, where this
	// says (handshake.ProviderNamespace).
	ProviderTenantNamespace string
	// PinnedOnce is, on a consumer, that a handshake pinned this record's proxy and tenant
	// namespace, or its administrator forgot them (ForgetProxy), at least once: the
	// manager's pin of a peering a Peering made before the pins existed (a one-time
	// migration) never applies to it again, whatever was forgotten since (helper-47's F1:
	// an Identity writer who put back an Identity after unauthenticate had the manager pin
	// again what the administrator had forgotten).
	PinnedOnce bool
	// PinnedByManager is, on a consumer, that the tenant namespace pinned (and the proxy
	// with it) is the manager's pin of a Peering's legacy peering, not a handshake's: the
	// manager cannot tell that the Identity it saw was the Peering's (helper-48: a peering
	// made by hand since, elsewhere). The identity controller holds Identities to it all the
	// same, but no proof says "verified" on its word alone, and liqoctl authenticate, which
	// reads the namespace from the provider, replaces it, as generate tenant does with
	// --remote-tenant-namespace. A namespace a handshake pinned is never marked, even when
	// the manager pins the proxy beside it.
	PinnedByManager bool
	// Peering is, on a consumer, the Peering that declared the peering with the remote
	// cluster, and the bootstrap credentials it consumed: what its manager decides from,
	// where a Peering's status writer cannot reach.
	Peering *RecordedPeering
	// Approval is, on a provider, its administrator's decision about the key of the remote
	// cluster's handshake (liqoctl approve tenant, deny tenant): nil when they made none.
	// It names the key they saw, so a handshake with another key waits again.
	Approval *Approval
	// KeyMove is, on a consumer, the move of its identity with the remote provider from
	// one of its keys to the next (a key rotation): what the rotation resumes from.
	KeyMove *KeyMove
	// KeyRotation is, on a provider, the remote cluster's rotation of its key, once proven
	// (nil: none): written only by the manager.
	KeyRotation *KeyRotation
	// SliceCopies is, on a consumer, the UID of the copy its slice controller made (or took
	// for its slice's) on the remote provider, by slice name, until the slice is let go.
	// The labels of a copy are the provider's writers' to take off and put back, and the
	// slice's own metadata its writers': the copy a slice made is known here, and deleted
	// with the slice whatever its labels say then.
	SliceCopies map[string]types.UID

	// from is the ConfigMap GetTenantRecord read the record from (nil otherwise), for
	// UpdateTenantRecordAsRead to write over that version without reading it again.
	from *corev1.ConfigMap
}

// KeyMove is a consumer's record of moving its control-plane identity with one provider
// to its next key (protocol.md, "11. Key rotation").
type KeyMove struct {
	// From and To are the fingerprints of the old and the new key.
	From string `json:"from"`
	To   string `json:"to"`
	// OldCertificate is the certificate (PEM) of the old key the Identity held before the
	// move: the consumer proves with it, and the old key, that it authorizes nothing.
	OldCertificate string `json:"oldCertificate,omitempty"`
	// Proven is when that proof succeeded (nil: not yet).
	Proven *time.Time `json:"proven,omitempty"`
}

// RecordedPeering is, on a consumer, what its manager keeps of a declared peering.
type RecordedPeering struct {
	// Name and UID of the Peering that owns the peering (empty once it left).
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
	// Slices are the names of the ResourceSlices the Peering made (a slice's label, which
	// its writers may set, never says so).
	Slices []string `json:"slices,omitempty"`
	// Consumed are the bootstrap credentials used with this provider, until they expire:
	// none is used twice.
	Consumed []ConsumedBootstrap `json:"consumed,omitempty"`
}

// ConsumedBootstrap is a bootstrap credential (a provider's peering user) a Peering used.
type ConsumedBootstrap struct {
	// User and Serial of the peering user's certificate.
	User   string `json:"user"`
	Serial string `json:"serial"`
	// NotAfter is when that certificate expires: it is forgotten then.
	NotAfter time.Time `json:"notAfter"`
	// Peering is the UID of the Peering whose handshake used it: what says that Peering
	// made the peering (an Identity's status, which status writers may write, never does).
	Peering string `json:"peering,omitempty"`
	// Retired is when the peering user was proven retired on the provider (nil: not yet).
	Retired *time.Time `json:"retired,omitempty"`
}

// ConsumedBootstrap returns the bootstrap credential of serial the record says was used,
// nil when none.
func (r *TenantRecord) ConsumedBootstrap(serial string) *ConsumedBootstrap {
	if r == nil || r.Peering == nil {
		return nil
	}
	for i := range r.Peering.Consumed {
		if r.Peering.Consumed[i].Serial == serial {
			return &r.Peering.Consumed[i]
		}
	}
	return nil
}

// Consume records the bootstrap credential b as used (once), and forgets those expired
// at now.
func (r *TenantRecord) Consume(b ConsumedBootstrap, now time.Time) {
	if r.Peering == nil {
		r.Peering = &RecordedPeering{}
	}
	r.Peering.Consumed = slices.DeleteFunc(r.Peering.Consumed, func(c ConsumedBootstrap) bool { return !now.Before(c.NotAfter) })
	if r.ConsumedBootstrap(b.Serial) == nil {
		r.Peering.Consumed = append(r.Peering.Consumed, b)
	}
}

// Decisions of an Approval.
const (
	// Approved: the key may get a certificate.
	Approved = "Approved"
	// Denied: the key gets no certificate, and its tenant no access.
	Denied = "Denied"
)

// Approval is a provider administrator's decision about one consumer key.
type Approval struct {
	// Decision is Approved or Denied.
	Decision string `json:"decision"`
	// KeyFingerprint is the fingerprint of the key decided about: the one the Tenant's
	// sealed acceptance named when the administrator decided.
	KeyFingerprint string `json:"keyFingerprint"`
	// Reason is the administrator's reason, which the consumer sees (a denial has one).
	Reason string `json:"reason,omitempty"`
	// At is when they decided.
	At time.Time `json:"at"`
}

// ApprovalOf is the decision the record holds about the key with fingerprint fp (nil:
// none). An approval is of the key the administrator saw: another key waits again. A
// denial is of the cluster: a denied consumer coming back with another key stays denied,
// whether approval is required or not, until its administrator approves it.
func (r *TenantRecord) ApprovalOf(fp string) *Approval {
	if r == nil || r.Approval == nil || fp == "" {
		return nil
	}
	if r.Approval.Decision == Denied || r.Approval.KeyFingerprint == fp {
		return r.Approval
	}
	return nil
}

// RecordedPeeringUser is a peering user as its tenant record holds it.
type RecordedPeeringUser struct {
	// User is its user name, liqo-peer-user-<consumer>-<random>.
	User string `json:"user"`
	// Serial and NotAfter are those of its certificate.
	Serial   string    `json:"serial"`
	NotAfter time.Time `json:"notAfter"`
}

// PublishedIn returns the control-plane certificate the record says this provider last
// published in the Tenant with UID tenantUID, and its PEM; false when it published none
// there (another Tenant's, none, or a record that does not say), or it does not parse.
func (r *TenantRecord) PublishedIn(tenantUID string) (*x509.Certificate, []byte, bool) {
	if r == nil || r.PublishedCertificate == "" || r.PublishedForTenant != tenantUID {
		return nil, nil, false
	}
	pem := []byte(r.PublishedCertificate)
	cert, err := authn.ParseCertificate(pem)
	return cert, pem, err == nil
}

// ConsumedNonce is a nonce a provider accepted a handshake with. The nonce Secret is
// kept (a Liqo consumer re-running its handshake expects to find the same nonce), so
// single use is enforced here, where the tenant cannot write: the nonce verifies again
// only for the very Tenant object, key and CSR it was consumed by, so that re-applying
// the accepted Tenant converges, and a replay (even of the same spec in a re-created
// Tenant) or any other key or CSR needs a new nonce.
type ConsumedNonce struct {
	// Digest is the SHA-256 of the nonce text, in hex.
	Digest string `json:"digest"`
	// TenantUID, KeyFingerprint and CSRDigest are those of the handshake it was
	// consumed by.
	TenantUID      string `json:"tenantUID"`
	KeyFingerprint string `json:"keyFingerprint"`
	CSRDigest      string `json:"csrDigest"`
	// SecretUID is the UID of the nonce Secret it was read from: a nonce written over the
	// consumed one in that Secret is no nonce of a new handshake (those come in a new
	// Secret), whatever its value.
	SecretUID string `json:"secretUID,omitempty"`
	// At is when it was consumed.
	At time.Time `json:"at"`
}

// NonceDigest is the digest a ConsumedNonce records of nonce.
func NonceDigest(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return hex.EncodeToString(sum[:])
}

// Consumed reports whether nonce was consumed by a handshake of another key than the one
// with fingerprint fp. The same key may present it again, in the Tenant that consumed it
// (a re-applied Tenant, a status save that failed) or in a Tenant re-created after that one
// was deleted (a Liqo consumer re-running its liqoctl authenticate after unauthenticate,
// which keeps its signed nonce): that certifies the consumer's own key again, as any new
// handshake of that consumer would; keeping a consumer out is a drain, not a deletion.
// The nonce's TTL still bounds it.
func (r *TenantRecord) Consumed(nonce, fp string) bool {
	if r == nil || r.ConsumedNonce == nil || r.ConsumedNonce.Digest != NonceDigest(nonce) {
		return false
	}
	return r.ConsumedNonce.KeyFingerprint != fp
}

// NonceUsed reports whether a handshake consumed the nonce value held by the nonce Secret
// with UID secretUID: the same value, or any value written over the consumed one in the
// Secret it was read from (a new handshake's nonce comes in a new Secret). The record, which
// no tenant writes, decides: the Secret's annotations are anyone's who may write it.
func (r *TenantRecord) NonceUsed(value, secretUID string) bool {
	if r == nil || r.ConsumedNonce == nil {
		return false
	}
	c := r.ConsumedNonce
	return c.Digest == NonceDigest(value) || (c.SecretUID != "" && c.SecretUID == secretUID)
}

// IssuedCertificate is one client certificate a provider had issued to a remote cluster.
type IssuedCertificate struct {
	// Serial is the serial number in hex.
	Serial string `json:"serial"`
	// NotAfter is when it expires.
	NotAfter time.Time `json:"notAfter"`
	// KeyFingerprint is the fingerprint of the consumer key it certifies.
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
	// Slice names the ResourceSlice whose identity it certifies ("" for the consumer's
	// control-plane identity).
	Slice string `json:"slice,omitempty"`
}

// Valid returns the certificates that have not expired at now, soonest expiry first.
func (r *TenantRecord) Valid(now time.Time) []IssuedCertificate {
	if r == nil {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(r.Certificates), func(c IssuedCertificate) bool { return !now.Before(c.NotAfter) })
	slices.SortFunc(out, func(a, b IssuedCertificate) int { return a.NotAfter.Compare(b.NotAfter) })
	return out
}

// AddCertificate records c, once, and forgets the certificates expired at now.
func (r *TenantRecord) AddCertificate(c IssuedCertificate, now time.Time) {
	r.Certificates = r.Valid(now)
	if !slices.ContainsFunc(r.Certificates, func(x IssuedCertificate) bool { return x.Serial == c.Serial }) {
		r.Certificates = append(r.Certificates, c)
	}
}

// jsonFields are the fields of the record kept as JSON, by key, as pointers to them.
func (r *TenantRecord) jsonFields() map[string]any {
	return map[string]any{recordCertsKey: &r.Certificates, recordLimitsKey: &r.SliceLimits, recordNonceKey: &r.ConsumedNonce, recordPeeringUserKey: &r.PeeringUser,
		recordPeeringKey: &r.Peering, recordApprovalKey: &r.Approval, recordKeyMoveKey: &r.KeyMove, recordRotationKey: &r.KeyRotation, recordProxyKey: &r.ProxyURL,
		recordSliceCopiesKey: &r.SliceCopies}
}

func recordFromConfigMap(remoteID string, cm *corev1.ConfigMap) (*TenantRecord, error) {
	r := &TenantRecord{RemoteID: remoteID, Namespace: cm.Data[recordNamespaceKey],
		NamespaceUID: types.UID(cm.Data[recordNamespaceUIDKey]), CAFingerprint: cm.Data[recordCAKey], State: cm.Data[recordStateKey],
		PublishedCAFingerprint: cm.Data[recordPubCAKey], PublishedAPIServer: cm.Data[recordPubServerKey], RenewSerial: cm.Data[recordRenewKey],
		PublishedCertificate: cm.Data[recordPubCertKey], PublishedForTenant: cm.Data[recordPubTenantKey], ProviderTenantNamespace: cm.Data[recordProviderNSKey],
		PinnedOnce: cm.Data[recordPinnedOnceKey] == "true", PinnedByManager: cm.Data[recordManagerPinKey] == "true"}
	for key, into := range r.jsonFields() {
		if v := cm.Data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), into); err != nil {
				return nil, fmt.Errorf("ConfigMap %s/%s: %s is not valid: %w", cm.Namespace, cm.Name, key, err)
			}
		}
	}
	return r, nil
}

func (r *TenantRecord) writeTo(cm *corev1.ConfigMap) error {
	cm.Labels = mergeLabels(cm.Labels, map[string]string{wire.TenantRecordLabel: "true", wire.RemoteClusterIDLabel: r.RemoteID, wire.ManagedByLabel: wire.ManagedByValue})
	cm.Data = map[string]string{recordNamespaceKey: r.Namespace, recordNamespaceUIDKey: string(r.NamespaceUID), recordCAKey: r.CAFingerprint, recordStateKey: r.State,
		recordPubCAKey: r.PublishedCAFingerprint, recordPubServerKey: r.PublishedAPIServer, recordRenewKey: r.RenewSerial, recordPubCertKey: r.PublishedCertificate,
		recordPubTenantKey: r.PublishedForTenant, recordProviderNSKey: r.ProviderTenantNamespace}
	if r.PinnedOnce {
		cm.Data[recordPinnedOnceKey] = "true"
	}
	if r.PinnedByManager {
		cm.Data[recordManagerPinKey] = "true"
	}
	for key, v := range r.jsonFields() {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if e := string(b); e != "null" && e != "[]" && e != "{}" { // an empty field is left out
			cm.Data[key] = e
		}
	}
	size := 0
	for k, v := range cm.Data {
		if v == "" {
			delete(cm.Data, k)
		}
		size += len(k) + len(v)
	}
	if size > MaxRecordSize {
		return fmt.Errorf("the tenant record of %q would hold %d bytes, more than the %d a ConfigMap safely holds: it lists %d certificates not expired", r.RemoteID, size, MaxRecordSize, len(r.Certificates))
	}
	return nil
}

// MaxRecordSize is the most a tenant record holds: a ConfigMap holds at most 1 MiB. A
// provider records every certificate it issued to a cluster until it expires: with the
// slices a tenant may hold (64 by default) each renewed before expiry, that is a few
// hundred entries of about 200 bytes.
const MaxRecordSize = 900 << 10

func mergeLabels(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// GetTenantRecord reads the record of remoteID; it is nil when there is none.
func GetTenantRecord(ctx context.Context, c client.Reader, liqoNS, remoteID string) (*TenantRecord, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: liqoNS, Name: wire.TenantRecordName(remoteID)}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the tenant record of %q: %w", remoteID, err)
	}
	if cm.Labels[wire.TenantRecordLabel] != "true" {
		return nil, nil
	}
	r, err := recordFromConfigMap(remoteID, &cm)
	if r != nil {
		r.from = &cm
	}
	return r, err
}

// ListTenantRecords reads every tenant record of the Liqo namespace.
func ListTenantRecords(ctx context.Context, c client.Reader, liqoNS string) ([]*TenantRecord, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(liqoNS), client.MatchingLabels{wire.TenantRecordLabel: "true"}); err != nil {
		return nil, err
	}
	var out []*TenantRecord
	for i := range list.Items {
		cm := &list.Items[i]
		id := cm.Labels[wire.RemoteClusterIDLabel]
		if id == "" || cm.Name != wire.TenantRecordName(id) {
			continue
		}
		r, err := recordFromConfigMap(id, cm)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// UpdateTenantRecord changes the record of remoteID with mutate, retrying on conflicts; it
// reads through r (the API server, not a cache that may lag) and writes through c.
// A missing record is created only when create is set: the manager completes records,
// but only an administrator's act (liqoctl) makes a namespace a tenant namespace.
func UpdateTenantRecord(ctx context.Context, c client.Client, r client.Reader, liqoNS, remoteID string, create bool, mutate func(*TenantRecord) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return updateRecordOnce(ctx, c, r, liqoNS, remoteID, create, mutate)
	})
}

// UpdateTenantRecordAsRead is UpdateTenantRecord for a command that read the record
// earlier (read, from GetTenantRecord; nil: none) and nobody else writes meanwhile: its
// first attempt writes over the version read, without reading it again. A version that
// changed since cannot be written (the update carries its resourceVersion and conflicts),
// and whatever the first attempt could not do is decided again on a live read.
func UpdateTenantRecordAsRead(ctx context.Context, c client.Client, read *TenantRecord, liqoNS, remoteID string, create bool, mutate func(*TenantRecord) error) error {
	if read != nil && read.from != nil && writeRecord(ctx, c, read.from.DeepCopy(), liqoNS, remoteID, create, mutate) == nil {
		return nil
	}
	return UpdateTenantRecord(ctx, c, c, liqoNS, remoteID, create, mutate)
}

// UpdateCachedTenantRecord is UpdateTenantRecord for a controller: its first attempt
// reads the record through c's cache, which nearly always holds it already, and saves a
// round trip. A stale copy cannot be written (the update carries its resourceVersion and
// conflicts), and whatever the first attempt could not do (a conflict, a refusal by
// mutate, a record the cache does not hold) is decided again on a read through live, so
// that nothing is refused, or written, on the word of a lagging cache.
func UpdateCachedTenantRecord(ctx context.Context, c client.Client, live client.Reader, liqoNS, remoteID string, create bool, mutate func(*TenantRecord) error) error {
	if updateRecordOnce(ctx, c, c, liqoNS, remoteID, create, mutate) == nil {
		return nil
	}
	return UpdateTenantRecord(ctx, c, live, liqoNS, remoteID, create, mutate)
}

func updateRecordOnce(ctx context.Context, c client.Client, r client.Reader, liqoNS, remoteID string, create bool, mutate func(*TenantRecord) error) error {
	cm := &corev1.ConfigMap{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: liqoNS, Name: wire.TenantRecordName(remoteID)}, cm); {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return fmt.Errorf("reading the tenant record of %q: %w", remoteID, err)
	}
	return writeRecord(ctx, c, cm, liqoNS, remoteID, create, mutate)
}

// writeRecord applies mutate to the record read as cm (nil: there is none) and writes it
// back; a write that lost a race is a conflict.
func writeRecord(ctx context.Context, c client.Client, cm *corev1.ConfigMap, liqoNS, remoteID string, create bool, mutate func(*TenantRecord) error) error {
	exists := cm != nil
	if !exists && !create {
		return fmt.Errorf("%w for cluster %q: run liqoctl authenticate (or create nonce, generate tenant) to make one", ErrTenantNamespaceNotFound, remoteID)
	}
	rec := &TenantRecord{RemoteID: remoteID}
	if exists {
		var err error
		if rec, err = recordFromConfigMap(remoteID, cm); err != nil {
			return err
		}
	} else {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: liqoNS, Name: wire.TenantRecordName(remoteID)}}
	}
	before := cm.DeepCopy()
	if err := mutate(rec); err != nil {
		return err
	}
	if err := rec.writeTo(cm); err != nil {
		return err
	}
	var err error
	switch {
	case !exists:
		err = c.Create(ctx, cm)
	case !equalConfigMaps(before, cm):
		err = c.Update(ctx, cm)
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the tenant record of %q: %w", remoteID, err)
	}
	if apierrors.IsAlreadyExists(err) {
		return apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, err)
	}
	return err
}

// createTenantRecord makes the record of remoteID, which a read just found missing,
// without reading it again; if it exists by now, it is updated as UpdateTenantRecord does.
func createTenantRecord(ctx context.Context, c client.Client, liqoNS, remoteID string, mutate func(*TenantRecord) error) error {
	if writeRecord(ctx, c, nil, liqoNS, remoteID, true, mutate) == nil {
		return nil
	}
	return UpdateTenantRecord(ctx, c, c, liqoNS, remoteID, true, mutate)
}

func equalConfigMaps(a, b *corev1.ConfigMap) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Data, b.Data)
}

// VerifyTenantNamespace reports whether namespace ns is the tenant namespace of remoteID:
// this cluster's record names it, with its UID, and it carries the labels of the
// protocol. When it is not, why says so in words for an Event.
func VerifyTenantNamespace(ctx context.Context, c client.Reader, liqoNS, ns, remoteID string) (ok bool, why string, err error) {
	if remoteID == "" {
		return false, fmt.Sprintf("namespace %q: the object names no remote cluster", ns), nil
	}
	rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID)
	if err != nil {
		return false, "", err
	}
	return checkRecorded(ctx, c, rec, ns, remoteID)
}

// checkRecorded is VerifyTenantNamespace with the record already read (nil: none).
func checkRecorded(ctx context.Context, c client.Reader, rec *TenantRecord, ns, remoteID string) (ok bool, why string, err error) {
	if rec == nil || rec.Namespace == "" {
		return false, fmt.Sprintf("namespace %q is not the tenant namespace of cluster %q: this cluster never made one for it (liqoctl authenticate, create nonce or generate tenant do)", ns, remoteID), nil
	}
	if rec.Namespace != ns {
		return false, fmt.Sprintf("namespace %q is not the tenant namespace of cluster %q, %q is", ns, remoteID, rec.Namespace), nil
	}
	var n corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("namespace %q, the tenant namespace of cluster %q, does not exist", ns, remoteID), nil
		}
		return false, "", err
	}
	if n.UID != rec.NamespaceUID {
		return false, fmt.Sprintf("namespace %q was deleted and re-created since it was made the tenant namespace of cluster %q: re-run liqoctl authenticate to adopt it", ns, remoteID), nil
	}
	if !IsTenantNamespaceOf(&n, remoteID) {
		return false, fmt.Sprintf("namespace %q lost the labels %s=%s, %s=true", ns, wire.RemoteClusterIDLabel, remoteID, wire.TenantNamespaceLabel), nil
	}
	return true, "", nil
}

// StateInForce is the administrative state in force for a Tenant whose
// spec.tenantCondition is spec, on a provider whose record of its cluster is rec (nil:
// none): the stricter of the two. The record is the administrator's, the spec anyone's
// who may write the Tenant (a peering user, the tenant through Liqo's role): a spec may
// make a tenant stricter, never undo a cordon or a drain.
func StateInForce(rec *TenantRecord, spec authv1beta1.TenantCondition) authv1beta1.TenantCondition {
	var decided authv1beta1.TenantCondition
	if rec != nil {
		decided = authv1beta1.TenantCondition(rec.State)
	}
	return authv1beta1.Stricter(decided, spec)
}

// ErrNotPublished means a Tenant's status publishes credentials its provider did not.
var ErrNotPublished = errors.New("the Tenant's status publishes what the provider did not")

// CheckPublished verifies what a Tenant's status publishes (ap, whose certificate is cert)
// against what the provider says it published in its record rec: the same CA, the same
// API server URL, and a certificate whose serial it issued for the same key. A record
// that says nothing of its publications (a provider older than them) checks nothing.
func (r *TenantRecord) CheckPublished(ap *authv1beta1.AuthParams, cert *x509.Certificate) error {
	if r == nil || r.PublishedCAFingerprint == "" {
		return nil
	}
	fp, err := authn.CAFingerprint(ap.CA)
	if err != nil {
		return fmt.Errorf("%w: its CA is not valid: %v", ErrNotPublished, err)
	}
	if fp != r.PublishedCAFingerprint {
		return fmt.Errorf("%w: CA %s, while the provider published %s", ErrNotPublished, fp, r.PublishedCAFingerprint)
	}
	if ap.APIServer != r.PublishedAPIServer {
		return fmt.Errorf("%w: API server %q, while the provider published %q", ErrNotPublished, ap.APIServer, r.PublishedAPIServer)
	}
	keyFP, err := authn.Fingerprint(cert.PublicKey)
	if err != nil {
		return err
	}
	serial := cert.SerialNumber.Text(16)
	if !slices.ContainsFunc(r.Certificates, func(c IssuedCertificate) bool { return c.Serial == serial && c.KeyFingerprint == keyFP }) {
		return fmt.Errorf("%w: certificate %s, which the provider did not issue for key %s", ErrNotPublished, serial, keyFP)
	}
	return nil
}

// SliceUserIndex is the index (IndexSliceUsers) of a cache's tenant records and
// replicated ResourceSlices by the user names of the ResourceSlice identities they stand
// for: a tenant record by each slice certificate it lists (expired or not), a slice by its
// own. A record that cannot be read is indexed under unreadableRecord.
const SliceUserIndex = "liqo.io/slice-user"

// unreadableRecord indexes the tenant records whose content cannot be read: SliceUser
// refuses to answer while there is one, as reading every record did.
const unreadableRecord = "!unreadable"

// IndexSliceUsers registers SliceUserIndex with a cache's field indexer, so that SliceUser
// answers from the cache with one indexed lookup instead of reading every tenant record of
// the provider at each handshake (what made a provider's CPU grow with the square of its
// consumers).
func IndexSliceUsers(ctx context.Context, fi client.FieldIndexer) error {
	if err := fi.IndexField(ctx, &corev1.ConfigMap{}, SliceUserIndex, func(o client.Object) []string {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return nil
		}
		id := cm.Labels[wire.RemoteClusterIDLabel]
		if cm.Labels[wire.TenantRecordLabel] != "true" || id == "" || cm.Name != wire.TenantRecordName(id) {
			return nil
		}
		rec, err := recordFromConfigMap(id, cm)
		if err != nil {
			return []string{unreadableRecord}
		}
		var out []string
		for _, cert := range rec.Certificates {
			if cert.Slice != "" {
				out = append(out, authn.SliceUserName(cert.Slice, rec.RemoteID))
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing the tenant records: %w", err)
	}
	if err := fi.IndexField(ctx, &authv1beta1.ResourceSlice{}, SliceUserIndex, func(o client.Object) []string {
		rs, ok := o.(*authv1beta1.ResourceSlice)
		if !ok {
			return nil
		}
		return []string{authn.SliceUserName(rs.Name, sliceConsumer(rs))}
	}); err != nil {
		return fmt.Errorf("indexing the ResourceSlices: %w", err)
	}
	return nil
}

// sliceConsumer is the consumer a ResourceSlice copied to this provider is for.
func sliceConsumer(rs *authv1beta1.ResourceSlice) string {
	if rs.Spec.ConsumerClusterID != nil {
		return string(*rs.Spec.ConsumerClusterID)
	}
	return rs.Labels[wire.RemoteClusterIDLabel]
}

// SliceUser says, in words, which ResourceSlice identity of this provider has user name
// user ("" when none): a slice a consumer copied here (said first), or a slice whose
// certificate a tenant record lists as not expired at now. c is a cache with
// IndexSliceUsers. A tenant record that cannot be read is an error, whatever else
// matches, as it was when every record was read.
func SliceUser(ctx context.Context, c client.Reader, liqoNS, user string, now time.Time) (string, error) {
	var unreadable corev1.ConfigMapList
	if err := c.List(ctx, &unreadable, client.InNamespace(liqoNS), client.MatchingFields{SliceUserIndex: unreadableRecord}); err != nil {
		return "", fmt.Errorf("reading the tenant records: %w", err)
	}
	if len(unreadable.Items) > 0 {
		cm := &unreadable.Items[0]
		_, err := recordFromConfigMap(cm.Labels[wire.RemoteClusterIDLabel], cm)
		return "", err
	}
	var slices authv1beta1.ResourceSliceList
	if err := c.List(ctx, &slices, client.MatchingLabels{wire.ReplicationStatusLabel: "true"}, client.MatchingFields{SliceUserIndex: user}); err != nil {
		return "", fmt.Errorf("listing ResourceSlices: %w", err)
	}
	for i := range slices.Items {
		rs := &slices.Items[i]
		if authn.SliceUserName(rs.Name, sliceConsumer(rs)) == user {
			return fmt.Sprintf("the identity of ResourceSlice %s/%s", rs.Namespace, rs.Name), nil
		}
	}
	var records corev1.ConfigMapList
	if err := c.List(ctx, &records, client.InNamespace(liqoNS), client.MatchingLabels{wire.TenantRecordLabel: "true"}, client.MatchingFields{SliceUserIndex: user}); err != nil {
		return "", fmt.Errorf("reading the tenant records: %w", err)
	}
	for i := range records.Items {
		cm := &records.Items[i]
		id := cm.Labels[wire.RemoteClusterIDLabel]
		if id == "" || cm.Name != wire.TenantRecordName(id) {
			continue
		}
		rec, err := recordFromConfigMap(id, cm)
		if err != nil {
			return "", err
		}
		for _, cert := range rec.Valid(now) {
			if cert.Slice != "" && authn.SliceUserName(cert.Slice, rec.RemoteID) == user {
				return fmt.Sprintf("certificate %s of ResourceSlice %s of cluster %q", cert.Serial, cert.Slice, rec.RemoteID), nil
			}
		}
	}
	return "", nil
}

// RepinCACommand is the command with which this cluster's administrator pins CA
// fingerprint fp for provider providerID in place of the one pinned, once the provider's
// administrator confirmed it. Removing the pin instead would leave a moment in which the
// next Identity this cluster's manager accepts, whoever wrote it (an old one still valid
// included), chooses the pin.
func RepinCACommand(liqoNS, providerID, fp string) string {
	return fmt.Sprintf(`kubectl patch configmap -n %s %s --type=merge -p '{"data":{"%s":"%s"}}'`,
		liqoNS, wire.TenantRecordName(providerID), recordCAKey, fp)
}

// RepinCAAdvice is what every refusal of a provider CA other than the pinned one advises
// (the identity controller's and each handshake's): pin fp, the CA presented, in place of
// the old once the provider's administrator confirmed it (RepinCACommand).
func RepinCAAdvice(liqoNS, providerID, fp string) string {
	return fmt.Sprintf("if the provider's CA really changed, and its administrator confirms it is now %s (liqoctl info there shows it), pin that one in place of the old with %s",
		fp, RepinCACommand(liqoNS, providerID, fp))
}

// UnpinProxyCommand is the command that forgets the proxy pinned for providerID, for its
// administrator to change the proxy this cluster reaches it through.
func UnpinProxyCommand(liqoNS, providerID string) string {
	return fmt.Sprintf(`kubectl patch configmap -n %s %s --type=json -p '[{"op":"remove","path":"/data/%s"}]'`,
		liqoNS, wire.TenantRecordName(providerID), recordProxyKey)
}

// CheckPinnedProxy says why proxy is not the one pinned in r for its provider (nil: it
// is, or none is pinned).
func (r *TenantRecord) CheckPinnedProxy(liqoNS, proxy string) error {
	if r == nil || r.ProxyURL == nil || *r.ProxyURL == proxy {
		return nil
	}
	if r.PinnedByManager {
		// No command built from proxy: an Identity writer may have chosen it.
		return fmt.Errorf("%w: this cluster's manager pinned %s for provider %q, its guess for a Peering's peering older than the pins, not %s: if this cluster reaches the provider otherwise, liqoctl authenticate with both kubeconfigs and --tenant-proxy-url set to the proxy this cluster reaches it through replaces the guess, as does liqoctl generate tenant with that flag and --remote-tenant-namespace as the provider's administrator gives it (liqoctl create nonce prints it there)",
			ErrProxyNotPinned, DescribeProxy(*r.ProxyURL), r.RemoteID, DescribeProxy(proxy))
	}
	return fmt.Errorf("%w: this cluster pinned %s for provider %q at an earlier handshake, not %s: if this cluster should now reach it otherwise, forget the pin with %s (liqoctl unauthenticate forgets it too) and authenticate again",
		ErrProxyNotPinned, DescribeProxy(*r.ProxyURL), r.RemoteID, DescribeProxy(proxy), UnpinProxyCommand(liqoNS, r.RemoteID))
}

// CheckIdentityProxy says why an Identity of r's provider, or a kubeconfig made from one,
// may not reach the provider through proxy (nil: it may). It may through the proxy a
// handshake pinned in r and, with none pinned (a peering older than the pin, an unpin, an
// unauthenticate), through none: an Identity writer's proxy is never taken for want of a
// pin. CheckPinnedProxy, which a handshake asks before it pins, lets anything through
// where nothing is pinned; this does not. The advice names no command with proxy in it:
// an Identity writer chose it.
func (r *TenantRecord) CheckIdentityProxy(liqoNS, providerID, proxy string) error {
	if r != nil && r.ProxyURL != nil {
		return r.CheckPinnedProxy(liqoNS, proxy)
	}
	if proxy == r.PinnedProxy() {
		return nil
	}
	return fmt.Errorf("%w: this cluster pinned no proxy for provider %q, and takes %s only once a handshake pinned it: if this cluster reaches the provider through it, run liqoctl authenticate (or generate tenant) again with --tenant-proxy-url set to it",
		ErrProxyNotPinned, providerID, DescribeProxy(proxy))
}

// PinnedProxy is the proxy an Identity of r's provider reaches it through: the one a
// handshake pinned, "" (none) when none is pinned or there is no record
// (CheckIdentityProxy).
func (r *TenantRecord) PinnedProxy() string {
	if r == nil || r.ProxyURL == nil {
		return ""
	}
	return *r.ProxyURL
}

// ForgetProxy forgets the proxy and the tenant namespace pinned for providerID, once the
// peering's control-plane Identity is removed: they were that peering's way to the
// provider and its place there, and a new peering chooses its own. The record is marked
// PinnedOnce, so that the manager never pins it again as a Peering's legacy peering;
// nothing is written when none is pinned and no Peering claimed it, or it is marked.
func ForgetProxy(ctx context.Context, c client.Client, liqoNS, providerID string) error {
	rec, err := GetTenantRecord(ctx, c, liqoNS, providerID)
	// With nothing pinned, only a record a Peering claimed takes the marker: the manager
	// pins no other (pinLegacy).
	if err != nil || rec == nil || rec.ProxyURL == nil && rec.ProviderTenantNamespace == "" && (rec.PinnedOnce || rec.Peering == nil) {
		return err
	}
	return UpdateTenantRecord(ctx, c, c, liqoNS, providerID, false, func(r *TenantRecord) error {
		r.ProxyURL, r.ProviderTenantNamespace, r.PinnedOnce, r.PinnedByManager = nil, "", true, false
		return nil
	})
}

// ProviderNamespaceOr is this cluster's tenant namespace on r's provider: the one a
// handshake pinned, else named (an Identity's spec.namespace: a peering older than the
// pin, or no record).
func (r *TenantRecord) ProviderNamespaceOr(named string) string {
	if r == nil || r.ProviderTenantNamespace == "" {
		return named
	}
	return r.ProviderTenantNamespace
}

// ErrTenantNamespaceNotPinned means a tenant namespace on a provider is not the one this
// cluster pinned for it.
var ErrTenantNamespaceNotPinned = errors.New("not the pinned tenant namespace")

// CheckProviderNamespace says why ns is not the tenant namespace pinned in r for this
// cluster on its provider (nil: it is, or none is pinned: a peering older than the pin
// keeps the namespace its Identity names).
func (r *TenantRecord) CheckProviderNamespace(ns string) error {
	if r == nil || r.ProviderTenantNamespace == "" || r.ProviderTenantNamespace == ns {
		return nil
	}
	if r.PinnedByManager {
		return fmt.Errorf("%w: this cluster's manager pinned tenant namespace %q on provider %q, its guess for a Peering's peering older than the pins (the only one a peering user reaches), not %q: liqoctl authenticate with both kubeconfigs replaces it with the one the provider keeps, as does liqoctl generate tenant with --remote-tenant-namespace as the provider's administrator gives it (liqoctl create nonce prints it there)",
			ErrTenantNamespaceNotPinned, r.ProviderTenantNamespace, r.RemoteID, ns)
	}
	return fmt.Errorf("%w: this cluster pinned tenant namespace %q on provider %q at an earlier handshake, not %q: confirm which is right with the provider's administrator (liqoctl create nonce prints it there); if the pin is wrong, or the namespace moved, liqoctl unauthenticate --remote-cluster-id %s forgets it (with the peering, if there is one), then run the handshake again",
		ErrTenantNamespaceNotPinned, r.ProviderTenantNamespace, r.RemoteID, ns, r.RemoteID)
}

// ErrProxyNotPinned means a proxy is not the one this cluster pinned for a provider.
var ErrProxyNotPinned = errors.New("not the pinned proxy")

// DescribeProxy says how a proxy URL reaches a provider: "proxy <url>", or "no proxy".
func DescribeProxy(proxy string) string {
	if proxy == "" {
		return "no proxy"
	}
	return fmt.Sprintf("proxy %q", proxy)
}

// KeyMoveOf is the record's KeyMove (nil: none, or no record).
func (r *TenantRecord) KeyMoveOf() *KeyMove {
	if r == nil {
		return nil
	}
	return r.KeyMove
}
