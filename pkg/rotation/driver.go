package rotation

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/providerclient"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// Driver carries out a cluster's rotation, one idempotent pass at a time (Step).
type Driver struct {
	// Client is this cluster's: the keys Secret, Identities, kubeconfig Secrets and tenant
	// records (read and written), Tenants (read, when Provider).
	Client client.Client
	// Namespace is the Liqo namespace; ClusterID this cluster's.
	Namespace, ClusterID string
	// Algorithm is the next key's (Stage).
	Algorithm authn.Algorithm
	// Provider makes the retirement wait for the Tenants this cluster accepted to be
	// re-sealed with the current key.
	Provider bool
	// NoIdentities: this cluster runs no consumer side (a provider-only manager, which
	// caches no Identities): no provider to move, only the Tenants to re-seal.
	NoIdentities bool
	// Connect makes a client of a provider (providerclient.New with the project's scheme when nil).
	Connect func(*rest.Config) (client.Client, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Stage stages the next key (or keeps the one staged): the rotation's first step, and
// how an interrupted one resumes.
func (d *Driver) Stage(ctx context.Context) (cluster.KeySet, error) {
	return cluster.StageNextKey(ctx, d.Client, d.Namespace, d.Algorithm)
}

// Step makes one pass: each provider one step further, then the cluster's switch or
// retirement when the peers allow it. It returns the rotation's state after the pass.
func (d *Driver) Step(ctx context.Context) (Status, error) {
	ks, err := cluster.GetClusterKeys(ctx, d.Client, d.Namespace)
	if err != nil {
		return Status{}, err
	}
	if !ks.Rotating() {
		return Status{Phase: Idle}, nil
	}
	st, err := d.observe(ctx, ks, true)
	if err != nil {
		return st, err
	}
	switch decideCluster(clusterFacts{next: ks.Next != nil, previous: ks.Previous != nil, peers: st.Peers, slicesOld: len(st.SlicesOnPrevious), tenantsOld: len(st.TenantsOnPrevious)}) {
	case clusterSwitch:
		if _, err := cluster.SwitchToNextKey(ctx, d.Client, d.Namespace); err != nil {
			return st, err
		}
		st.Phase = Switched
	case clusterRetire:
		if _, err := cluster.RetirePreviousKey(ctx, d.Client, d.Namespace); err != nil {
			return st, err
		}
		st.Phase = Retired
	}
	return st, nil
}

// Observe is the rotation's state without acting (liqoctl info and verify).
func (d *Driver) Observe(ctx context.Context) (Status, error) {
	ks, err := cluster.GetClusterKeys(ctx, d.Client, d.Namespace)
	if err != nil {
		return Status{}, err
	}
	if !ks.Rotating() {
		return Status{Phase: Idle}, nil
	}
	return d.observe(ctx, ks, false)
}

// observe reads every placed Identity: each provider's progress (acting on it when act),
// the slice Identities and the Tenants still on the previous key.
func (d *Driver) observe(ctx context.Context, ks cluster.KeySet, act bool) (Status, error) {
	st := Status{Phase: Staged}
	newKey := ks.Next
	if newKey == nil {
		st.Phase, newKey = Switched, ks.Current
	}
	var ids authv1beta1.IdentityList
	if !d.NoIdentities {
		if err := d.Client.List(ctx, &ids); err != nil {
			return st, err
		}
	}
	for i := range ids.Items {
		id := &ids.Items[i]
		peer := string(id.Spec.ClusterID)
		if id.DeletionTimestamp != nil {
			continue
		}
		if ok, _, err := cluster.VerifyTenantNamespace(ctx, d.Client, d.Namespace, id.Namespace, peer); err != nil || !ok {
			continue
		}
		if err := d.identity(ctx, ks, newKey, id, act, &st); err != nil {
			return st, err
		}
	}
	if d.Provider && ks.Previous != nil {
		old, err := acceptance.TenantsSealedBy(ctx, d.Client, ks.Previous)
		if err != nil {
			return st, err
		}
		st.TenantsOnPrevious = old
	}
	return st, nil
}

// identity adds one placed Identity to st: a provider's progress (acting on it when act),
// or a slice Identity still on the previous key.
func (d *Driver) identity(ctx context.Context, ks cluster.KeySet, newKey crypto.Signer, id *authv1beta1.Identity, act bool, st *Status) error {
	peer := string(id.Spec.ClusterID)
	switch id.Spec.Type {
	case authv1beta1.ControlPlaneIdentityType:
		if id.Name != wire.IdentityName(peer) {
			return nil
		}
		p, err := d.peer(ctx, ks, newKey, id, act)
		if err != nil {
			return fmt.Errorf("provider %s: %w", peer, err)
		}
		st.Peers = append(st.Peers, p)
	case authv1beta1.ResourceSliceIdentityType:
		if ks.Previous != nil && heldBy(ks, ks.Current, id.Spec.AuthParams.SignedCRT) != heldByNew {
			st.SlicesOnPrevious = append(st.SlicesOnPrevious, id.Namespace+"/"+id.Name)
		}
	}
	return nil
}

// heldBy says which key of the rotation holds a certificate: newKey, another key of ks,
// or none.
func heldBy(ks cluster.KeySet, newKey crypto.Signer, certPEM []byte) held {
	cert, err := authn.ParseCertificate(certPEM)
	if err != nil {
		return heldByNone
	}
	switch k := ks.Holding(cert.PublicKey); {
	case k == nil:
		return heldByNone
	case authn.PublicKeysEqual(k.Public(), newKey.Public()):
		return heldByNew
	default:
		return heldByOld
	}
}

// peerRun is what one pass knows of one provider: its facts, and the clients and objects
// the action needs.
type peerRun struct {
	facts  peerFacts
	id     *authv1beta1.Identity
	remote client.Client
	// cfg is how remote reaches the provider (server, CA, proxy) as the current identity.
	cfg    *rest.Config
	ns     string
	tenant *authv1beta1.Tenant
	renew  *authv1beta1.Renew
	record *cluster.TenantRecord
	oldKey crypto.Signer
	newKey crypto.Signer
	ks     cluster.KeySet
}

// peer decides one provider's step and, when act, carries it out.
func (d *Driver) peer(ctx context.Context, ks cluster.KeySet, newKey crypto.Signer, id *authv1beta1.Identity, act bool) (Progress, error) {
	r, err := d.gather(ctx, ks, newKey, id)
	if err != nil {
		return Progress{}, err
	}
	p, a := decidePeer(r.facts)
	if !act || a == doNothing {
		return p, nil
	}
	return d.carryOut(ctx, r, p, a)
}

// gather reads the facts of one provider.
func (d *Driver) gather(ctx context.Context, ks cluster.KeySet, newKey crypto.Signer, id *authv1beta1.Identity) (*peerRun, error) {
	peer := string(id.Spec.ClusterID)
	newFP, err := authn.Fingerprint(newKey.Public())
	if err != nil {
		return nil, err
	}
	r := &peerRun{id: id, ns: ptr.Deref(id.Spec.Namespace, ""), newKey: newKey, ks: ks,
		facts: peerFacts{peer: peer, newFP: newFP, server: id.Spec.AuthParams.APIServer, cert: heldBy(ks, newKey, id.Spec.AuthParams.SignedCRT)}}
	if cert, parseErr := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT); parseErr == nil && r.facts.cert == heldByOld {
		r.oldKey = ks.Holding(cert.PublicKey)
	}
	if r.record, err = cluster.GetTenantRecord(ctx, d.Client, d.Namespace, peer); err != nil {
		return nil, err
	}
	// Where a handshake pinned this cluster's tenant namespace on the provider, not where
	// an Identity writer moved spec.namespace: the move's Renew and the proof that the old
	// key lost its access are asked there (helper-39's F7).
	r.ns = r.record.ProviderNamespaceOr(r.ns)
	if m := r.record.KeyMoveOf(); m != nil {
		r.facts.moveTo, r.facts.proven = m.To, m.Proven != nil
	}
	if r.facts.cert == heldByNone || (r.facts.cert == heldByNew && (r.facts.moveTo != newFP || r.facts.proven)) {
		d.gatherLeftover(ctx, r)
		return r, nil
	}
	if err := d.gatherRemote(ctx, r); err != nil {
		r.facts.unreachable = err.Error()
	}
	return r, nil
}

// gatherLeftover looks, best effort, for a rotation Renew left on a provider that moved.
// A Renew left on a provider out of reach is harmless: removed at a later pass.
func (d *Driver) gatherLeftover(ctx context.Context, r *peerRun) {
	if r.facts.cert != heldByNew || d.connect(ctx, r) != nil {
		return
	}
	rn := &authv1beta1.Renew{}
	if err := r.remote.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: wire.KeyRotationRenewName}, rn); err == nil {
		r.renew, r.facts.renew = rn, true
	}
}

// connect builds the client of the provider from the Identity's kubeconfig.
func (d *Driver) connect(ctx context.Context, r *peerRun) error {
	var s corev1.Secret
	if err := d.Client.Get(ctx, client.ObjectKey{Namespace: r.id.Namespace, Name: wire.KubeconfigSecretName(r.id.Name)}, &s); err != nil {
		return fmt.Errorf("its kubeconfig: %w", err)
	}
	kubeconfig := s.Data[wire.KubeconfigField]
	cfg, err := providerclient.ProviderConfigFor(ctx, d.Client, d.Namespace, r.ks, d.ClusterID, r.id, kubeconfig, d.now())
	if err != nil {
		return fmt.Errorf("its kubeconfig: %w", err)
	}
	if info, readErr := authn.ReadKubeconfig(kubeconfig); readErr == nil {
		r.facts.kubeconfigMoved = bytes.Equal(info.CertPEM, r.id.Spec.AuthParams.SignedCRT) && r.facts.cert == heldByNew
	}
	r.cfg = cfg
	r.remote, err = d.client(cfg)
	return err
}

// gatherRemote reads the provider: this cluster's Tenant there (forbidden: a Liqo
// provider) and the rotation Renew.
func (d *Driver) gatherRemote(ctx context.Context, r *peerRun) error {
	if err := d.connect(ctx, r); err != nil {
		r.facts.kubeconfigMoved = false
		return err
	}
	t := &authv1beta1.Tenant{}
	err := r.remote.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: d.ClusterID}, t)
	switch {
	case apierrors.IsForbidden(err) && r.facts.cert == heldByOld:
		r.facts.liqo = true
		return nil
	case err != nil:
		r.facts.kubeconfigMoved = false
		return err
	}
	r.tenant = t
	rn := &authv1beta1.Renew{}
	err = r.remote.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: wire.KeyRotationRenewName}, rn)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	r.renew, r.facts.renew = rn, true
	r.facts.doneSigned = rn.Annotations[wire.RotationDoneSignatureAnnotation] != ""
	pub, pubErr := authn.ParsePublicKey(rn.Spec.PublicKey)
	r.facts.renewForThis = pubErr == nil && authn.PublicKeysEqual(pub, r.newKey.Public()) && (r.oldKey == nil || rn.Annotations[wire.RotationFromAnnotation] == fingerprint(r.oldKey))
	if ap := rn.Status.AuthParams; r.facts.renewForThis && ap.HasCertificate() {
		r.facts.answered = d.checkIssued(ap.SignedCRT, r) == nil
	}
	return nil
}

// checkIssued checks a certificate the provider issued for the new key: for it, this
// cluster's user, its key group, chaining to the Identity's (pinned) CA.
func (d *Driver) checkIssued(certPEM []byte, r *peerRun) error {
	cert, err := authn.VerifyCertificate(certPEM, r.id.Spec.AuthParams.CA, r.newKey.Public(), d.ClusterID, d.now())
	if err != nil {
		return err
	}
	group, err := authn.KeyGroup(d.ClusterID, r.newKey.Public())
	if err != nil {
		return err
	}
	if authn.CertificateKeyGroup(cert) != group {
		return fmt.Errorf("the certificate for the new key does not carry its key group %s", group)
	}
	return nil
}

func fingerprint(k crypto.Signer) string {
	fp, err := authn.Fingerprint(k.Public())
	if err != nil {
		return ""
	}
	return fp
}

func (d *Driver) now() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

func (d *Driver) client(cfg *rest.Config) (client.Client, error) {
	if d.Connect != nil {
		return d.Connect(cfg)
	}
	return providerclient.New(cfg, scheme.New())
}

// rotationOf is the statement of this move: consumer, provider, Tenant, keys, CSR.
func (d *Driver) rotationOf(r *peerRun, from string, csr []byte) authn.Rotation {
	return authn.Rotation{ConsumerID: d.ClusterID, ProviderID: r.facts.peer, TenantUID: string(r.tenant.UID), From: from, To: r.facts.newFP, CSRDigest: authn.CSRDigest(csr)}
}

// carryOut does the decided action and says the progress after it.
func (d *Driver) carryOut(ctx context.Context, r *peerRun, p Progress, a action) (Progress, error) {
	var err error
	switch a {
	case doRequest:
		err = d.request(ctx, r)
		p.State = Requested
	case doTake:
		err = d.take(ctx, r)
		p.State, p.Reason = Moved, "waiting for the kubeconfig of the new certificate"
	case doSignDone:
		err = d.signDone(ctx, r)
	case doProve:
		var left []string
		if left, err = d.prove(ctx, r); err == nil && len(left) > 0 {
			p.Reason = fmt.Sprintf("the old certificate still may %v: waiting for the provider to remove its old subject", left)
		} else if err == nil {
			p.State, p.Reason, p.Run = Proven, "", ""
		}
	case doDeleteRenew:
		if err = r.remote.Delete(ctx, r.renew); apierrors.IsNotFound(err) {
			err = nil
		}
	}
	return p, err
}

// request writes the rotation Renew (step 1): the new key, a key-bound CSR for it, and
// the request signed by both keys.
func (d *Driver) request(ctx context.Context, r *peerRun) error {
	csr, err := authn.ForgeKeyBoundCSRFor(r.newKey, d.ClusterID, wire.UserGroup)
	if err != nil {
		return err
	}
	pub, err := authn.MarshalPublicKey(r.newKey.Public())
	if err != nil {
		return err
	}
	from := fingerprint(r.oldKey)
	rot := d.rotationOf(r, from, csr)
	oldSig, err := authn.SignRotation(r.oldKey, rot)
	if err != nil {
		return err
	}
	newSig, err := authn.SignRotation(r.newKey, rot)
	if err != nil {
		return err
	}
	want := &authv1beta1.Renew{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: wire.KeyRotationRenewName,
		Labels: map[string]string{wire.RemoteClusterIDLabel: d.ClusterID, wire.ManagedByLabel: wire.ManagedByValue},
		Annotations: map[string]string{wire.RotationFromAnnotation: from,
			wire.RotationOldSignatureAnnotation: base64.StdEncoding.EncodeToString(oldSig),
			wire.RotationNewSignatureAnnotation: base64.StdEncoding.EncodeToString(newSig)}},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(d.ClusterID), IdentityType: authv1beta1.ControlPlaneIdentityType, PublicKey: pub, CSR: csr}}
	if r.renew == nil {
		return r.remote.Create(ctx, want)
	}
	// A Renew of an earlier request (another staged key): replaced as a whole.
	if err := r.remote.Delete(ctx, r.renew); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return r.remote.Create(ctx, want)
}

// take records the move (with the old certificate, for the proof) and puts the new
// certificate into the Identity (step 5): the identity controller writes its kubeconfig.
func (d *Driver) take(ctx context.Context, r *peerRun) error {
	move := cluster.KeyMove{From: fingerprint(r.oldKey), To: r.facts.newFP, OldCertificate: string(r.id.Spec.AuthParams.SignedCRT)}
	if err := cluster.UpdateTenantRecord(ctx, d.Client, d.Client, d.Namespace, r.facts.peer, false, func(rec *cluster.TenantRecord) error {
		if rec.KeyMove == nil || rec.KeyMove.To != move.To {
			rec.KeyMove = &move
		}
		return nil
	}); err != nil {
		return err
	}
	orig := r.id.DeepCopy()
	r.id.Spec.AuthParams.SignedCRT = r.renew.Status.AuthParams.SignedCRT
	return d.Client.Patch(ctx, r.id, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// signDone tells the provider, signed by the new key, that the identity moved (step 5's
// end): it may stop honouring the old certificate.
func (d *Driver) signDone(ctx context.Context, r *peerRun) error {
	rot := d.rotationOf(r, r.renew.Annotations[wire.RotationFromAnnotation], r.renew.Spec.CSR)
	sig, err := authn.SignRotationDone(r.newKey, rot)
	if err != nil {
		return err
	}
	orig := r.renew.DeepCopy()
	if r.renew.Annotations == nil {
		r.renew.Annotations = map[string]string{}
	}
	r.renew.Annotations[wire.RotationDoneSignatureAnnotation] = base64.StdEncoding.EncodeToString(sig)
	return r.remote.Patch(ctx, r.renew, client.MergeFrom(orig))
}

// prove asks the provider, with the old certificate and the old key, whether they may
// still do anything the tenant's rules grant (step 7); when nothing, it records the proof
// and removes the rotation Renew. It returns what the old certificate still may do.
func (d *Driver) prove(ctx context.Context, r *peerRun) ([]string, error) {
	move := r.record.KeyMoveOf()
	oldCert, err := authn.ParseCertificate([]byte(move.OldCertificate))
	if err != nil {
		return nil, fmt.Errorf("the recorded old certificate: %w", err)
	}
	oldKey := r.ks.Holding(oldCert.PublicKey)
	if oldKey == nil {
		return nil, fmt.Errorf("the old key of the recorded certificate is no longer among this cluster's keys")
	}
	keyPEM, err := authn.MarshalPrivateKey(oldKey)
	if err != nil {
		return nil, err
	}
	// The provider reached as the current identity reaches it (server, pinned CA, proxy),
	// with the old certificate instead.
	if r.cfg == nil {
		return nil, fmt.Errorf("provider %s is not connected", r.facts.peer)
	}
	cfg := rest.AnonymousClientConfig(r.cfg)
	cfg.CertData, cfg.KeyData = []byte(move.OldCertificate), keyPEM
	old, err := d.client(cfg)
	if err != nil {
		return nil, err
	}
	left, err := revocation.SelfAllowedActions(ctx, old, r.ns, access.TenantRules(d.ClusterID))
	if err != nil && !apierrors.IsUnauthorized(err) {
		return nil, err
	}
	if len(left) > 0 {
		return left, nil
	}
	now := d.now()
	if err := cluster.UpdateTenantRecord(ctx, d.Client, d.Client, d.Namespace, r.facts.peer, false, func(rec *cluster.TenantRecord) error {
		if rec.KeyMove != nil && rec.KeyMove.To == move.To {
			rec.KeyMove.Proven = &now
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if r.renew != nil {
		if err := r.remote.Delete(ctx, r.renew); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, nil
}
