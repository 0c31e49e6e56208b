// Package consumerslice is the consumer controller of ResourceSlices. A slice the consumer
// asks for lives in its tenant namespace of the provider; this controller completes it
// (the consumer and provider IDs, a CSR of the cluster key for the slice's own identity),
// writes it into the provider's tenant namespace with the control-plane identity (which
// may write ResourceSlices there and nothing more), reads the provider's answer back into
// the local slice, and turns an accepted answer into an Identity of type ResourceSlice,
// whose kubeconfig the identity controller writes after the same certificate checks as
// for the control plane. Nothing is ever written by the provider into the consumer.
//
// Who writes what it reads: the local slice is written by this cluster's administrator
// and by anyone allowed to write ResourceSlices in the tenant namespace; it only ever
// causes a request to the provider the tenant namespace's record names, with this
// cluster's own identity there, for a CSR this controller forges itself. The answer is
// written by the provider (and by anyone allowed to write the slice's status there); its
// certificate is checked by the identity controller against this cluster's key, the
// slice's user and the pinned provider CA before anything uses it.
package consumerslice

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/providerclient"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Requeue intervals of a consumer's slice. The provider's answer is on the provider, where
// this controller watches nothing, and the control-plane Identity it needs comes from
// another controller's work or an administrator's: what it waits for is read back at
// these paces rather than by the queue's failure backoff, which doubles up to minutes.
const (
	// providerRemovalPoll: a deleted slice waits for the provider to remove its copy (its
	// finalizer revokes what the slice was granted, within milliseconds): read back
	// shortly, at a steady pace.
	providerRemovalPoll = 50 * time.Millisecond
	// noControlPlaneRetry: the control-plane identity is missing or not usable yet (a
	// handshake to run or finish); each try records a Warning Event, so it is tried again
	// rarely enough for the Events to stay few.
	noControlPlaneRetry = 5 * time.Second
	// providerRetry: writing the slice to the provider failed (unreachable, refused); each
	// failure records a Warning Event too.
	providerRetry = 2 * time.Second
	// nameTakenRetry: the slice's name is taken on the provider by a slice that is not a
	// copy; it is looked at again, slowly, in case that slice goes.
	nameTakenRetry = 30 * time.Second
	// answerPoll: the provider decides a new slice and has its certificate signed within
	// milliseconds, while liqoctl waits for the answer.
	answerPoll = 50 * time.Millisecond
	// answerSlowAfter and answerSlowPoll: an answer that has taken longer than
	// answerSlowAfter waits on something slower (a signer, an administrator): it is read
	// back less often, so that an undecided slice costs the provider few requests.
	answerSlowAfter = 10 * time.Second
	answerSlowPoll  = 2 * time.Second
	// deniedRecheck: a denied slice is asked about again, for the provider's administrator
	// to change their mind (a tenant uncordoned, a class added, limits raised) without
	// anything on this side saying so.
	deniedRecheck = 3 * time.Second
	// acceptedRecheck: an accepted slice comes back at least this often for its renewed
	// certificate.
	acceptedRecheck = time.Minute
	// renewMargin: an accepted slice comes back this long after its certificate's
	// RenewAfter, when the provider has renewed it, and never sooner than this from now.
	renewMargin = time.Second
	// providerRequestTimeout bounds each request to the provider: an unreachable provider
	// holds a worker no longer than this.
	providerRequestTimeout = 10 * time.Second
)

// Reconciler drives the consumer's ResourceSlices.
type Reconciler struct {
	Client    client.Client
	Scheme    *runtime.Scheme
	Placement placement.Placement
	Recorder  events.EventRecorder
	ClusterID string
	// Keys are this cluster's keys as they are now: a slice's CSR is for the current one
	// (a key rotation switched it: the slice gets a new CSR), and the provider is reached
	// with the one that holds the control-plane certificate.
	Keys cluster.KeySource
	Now  func() time.Time

	// clients holds, per control-plane kubeconfig Secret, the provider client built from
	// it and the hash of the kubeconfig and pinned CA it was checked with: polls reuse it,
	// a renewed kubeconfig or another pin replaces it.
	clients sync.Map
	// recordLocks serializes, per provider, this controller's writes of its tenant record.
	recordLocks sync.Map
}

type providerClient struct {
	hash   [32]byte
	client client.Client
}

// IsRequest reports whether a slice is one the consumer asks for (Liqo's label for what
// its replicator copies to the provider).
func IsRequest(o client.Object) bool {
	return o.GetLabels()[wire.ReplicationRequestedLabel] == "true"
}

// handled says whether the controller drives o: a request, or one it made a request before
// (its finalizer), which a slice writer may have relabelled since: it is still let go
// when deleted, so that a deletion never waits on labels.
func handled(o client.Object) bool {
	return IsRequest(o) || controllerutil.ContainsFinalizer(o, wire.ConsumerSliceFinalizer)
}

// drives says whether Reconcile acts on rs: a request, or a slice it handled being deleted.
func drives(rs *authv1beta1.ResourceSlice) bool {
	return IsRequest(rs) || rs.DeletionTimestamp != nil && handled(rs)
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := wiring.NewController(mgr, "consumerslice", access.Consumer).
		For(&authv1beta1.ResourceSlice{}, predicate.NewPredicateFuncs(handled)).
		Owns(&authv1beta1.Identity{}, &authv1beta1.ResourceSlice{}).
		Reads(&corev1.Secret{})
	return b.WatchTenantNamespaces(wiring.Fixed("")).Complete(r)
}

// Reconcile drives one slice.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name == "" {
		return ctrl.Result{}, nil
	}
	rs := &authv1beta1.ResourceSlice{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !drives(rs) {
		return ctrl.Result{}, nil
	}
	provider := rs.Labels[wire.RemoteClusterIDLabel]
	if err := wire.ValidateSliceName(rs.Name); err != nil && rs.DeletionTimestamp == nil {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonSliceMisplaced, "RequestResourceSlice", "not requested: %v", err)
		return ctrl.Result{}, nil
	}
	ok, why, err := r.Placement.Verify(ctx, rs.Namespace, provider)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		if rs.DeletionTimestamp == nil {
			r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonSliceMisplaced, "RequestResourceSlice", "%s: a ResourceSlice is requested only from the tenant namespace of its provider", why)
		}
		return ctrl.Result{}, r.removeFinalizer(ctx, rs)
	}
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	remote, remoteNS, err := r.providerClient(ctx, rs.Namespace, provider, ks)
	if rs.DeletionTimestamp != nil {
		return r.deleting(ctx, rs, remote, remoteNS, err)
	}
	if changed, prepareErr := r.prepare(ctx, rs, provider, ks); prepareErr != nil || changed {
		return ctrl.Result{}, prepareErr
	}
	if err != nil {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonNoControlPlane, "RequestResourceSlice", "%v", err)
		return ctrl.Result{RequeueAfter: noControlPlaneRetry}, nil
	}
	return r.request(ctx, rs, provider, remote, remoteNS, ks)
}

// prepare puts the finalizer on the slice and completes its spec for key (the cluster's
// current one), patching what was completed: changed says the slice was patched (its
// event brings it back).
func (r *Reconciler) prepare(ctx context.Context, rs *authv1beta1.ResourceSlice, provider string, ks cluster.KeySet) (changed bool, err error) {
	if finalizerErr := r.addFinalizer(ctx, rs); finalizerErr != nil {
		return false, finalizerErr
	}
	orig := rs.DeepCopy()
	key, keyBound := r.controlPlaneKey(ctx, rs.Namespace, provider, ks)
	changed, err = r.complete(rs, provider, key, func() bool { return keyBound })
	if err != nil || !changed {
		return false, err
	}
	// A patch of what was completed (the cache keeps only this project's annotations),
	// with the resourceVersion read.
	return true, r.Client.Patch(ctx, rs, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// request writes the slice to the provider, reads the provider's answer back into the
// local slice's status, and turns an accepted one into the slice's Identity.
func (r *Reconciler) request(ctx context.Context, rs *authv1beta1.ResourceSlice, provider string, remote client.Client, remoteNS string, ks cluster.KeySet) (ctrl.Result, error) {
	answer, err := r.sync(ctx, rs, provider, remote, remoteNS)
	switch {
	case errors.Is(err, errTooManyCopies):
		return r.retryLater(rs, authv1beta1.ReasonSliceTooMany, nameTakenRetry, "no copy of the slice is made on provider %q: %v", provider, err)
	case errors.Is(err, errNotACopy):
		return r.retryLater(rs, authv1beta1.ReasonSliceNameTaken, nameTakenRetry,
			"ResourceSlice %s/%s on provider %q %v: nothing is written to it; ask under another name", remoteNS, rs.Name, provider, err)
	case err != nil:
		return r.retryLater(rs, authv1beta1.ReasonProviderUnreachable, providerRetry, "writing the slice to provider %s: %v", provider, err)
	}
	if answer.Status.AuthParams.HasCertificate() {
		refused, err := r.refusedCertificate(ctx, rs.Name, answer.Status.AuthParams, provider, ks)
		if err != nil {
			return ctrl.Result{}, err
		}
		if refused != nil {
			r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonSliceCertificateRefused, "RequestResourceSlice",
				"the certificate in the status of the slice's copy on provider %s is refused (%v): the slice keeps the one it had; the provider's controllers publish a new one", provider, refused)
			answer = answer.DeepCopy()
			answer.Status.AuthParams, answer.Status.Certificate = rs.Status.AuthParams.DeepCopy(), rs.Status.Certificate.DeepCopy()
		}
	}
	before := rs.Status.DeepCopy()
	rs.Status = *answer.Status.DeepCopy()
	if !equality.Semantic.DeepEqual(before, &rs.Status) {
		if err := r.Client.Status().Update(ctx, rs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if pendingAnswer(answer) {
		// Not decided, or accepted and its certificate not issued yet: the provider's
		// answer is read back shortly, less often as it takes longer.
		wait := answerPoll
		if age := r.Now().Sub(rs.CreationTimestamp.Time); age > answerSlowAfter {
			wait = answerSlowPoll
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.ensureIdentity(ctx, rs, provider, remoteNS); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.recheck(rs, answer)}, nil
}

// retryLater says with a Warning Event (reason) why the slice's request cannot go on now,
// and looks at it again after pace.
func (r *Reconciler) retryLater(rs *authv1beta1.ResourceSlice, reason string, pace time.Duration, format string, args ...any) (ctrl.Result, error) {
	r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, reason, "RequestResourceSlice", format, args...)
	return ctrl.Result{RequeueAfter: pace}, nil
}

// refusedCertificate says why the certificate of the provider's answer ap is refused (nil:
// it is taken): it must be issued to the slice's user by the CA pinned for provider (the
// CA ap names, checked against the pin where there is one), for a key of ks, and valid now. Whoever may write
// the status of the provider's copy writes this answer, not only the provider's
// controllers, and what is taken here becomes the slice's Identity and the certificate its
// deletion proves with.
func (r *Reconciler) refusedCertificate(ctx context.Context, name string, ap *authv1beta1.AuthParams, provider string, ks cluster.KeySet) (refused, err error) {
	cert, err := authn.ParseCertificate(ap.SignedCRT)
	if err != nil {
		return err, nil
	}
	key := ks.Holding(cert.PublicKey)
	if key == nil {
		return errors.New("it is for another key than this cluster's"), nil
	}
	if _, verifyErr := authn.VerifyCertificate(ap.SignedCRT, ap.CA, key.Public(), authn.SliceUserName(name, r.ClusterID), r.Now()); verifyErr != nil {
		return verifyErr, nil
	}
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.CAFingerprint == "" {
		// Nothing pinned yet: the identity controller pins the CA of the first Identity
		// that checks, and judges the slice's Identity against it.
		return nil, nil
	}
	if fp, fpErr := authn.CAFingerprint(ap.CA); fpErr != nil || fp != rec.CAFingerprint {
		return fmt.Errorf("its CA %s is not the %s pinned for provider %q", fp, rec.CAFingerprint, provider), nil
	}
	return nil, nil
}

// recheck is when a decided slice is read back: for the renewed certificate, or, when
// denied, for the provider to change its mind (a tenant uncordoned, a class added).
func (r *Reconciler) recheck(rs, answer *authv1beta1.ResourceSlice) time.Duration {
	next := acceptedRecheck
	if ok, _ := authv1beta1.SliceVerdict(answer.Status.Conditions); !ok {
		next = deniedRecheck
	}
	if c := rs.Status.Certificate; c != nil && c.RenewAfter != nil {
		next = min(next, max(c.RenewAfter.Sub(r.Now())+renewMargin, renewMargin))
	}
	return next
}

// pendingAnswer reports whether the provider has yet to decide on its copy of a slice, or
// accepted it and has yet to publish its certificate.
func pendingAnswer(cp *authv1beta1.ResourceSlice) bool {
	accepted, denied := authv1beta1.SliceVerdict(cp.Status.Conditions)
	switch {
	case cp.Status.ObservedGeneration < cp.Generation:
		return true
	case accepted:
		return !cp.Status.AuthParams.HasCertificate()
	}
	return denied == nil
}

// complete fills what the consumer's controller owns in the spec: both cluster IDs and
// the CSR of the slice's identity, for key (the cluster's current one): a CSR for any
// other key (the key switched in a rotation) is replaced, key-bound when keyBound says
// the control-plane identity with the provider is (the provider then binds the slice's
// key group, and the certificate of the old key authorizes nothing), in Liqo's form
// otherwise. It reports whether the spec changed.
func (r *Reconciler) complete(rs *authv1beta1.ResourceSlice, provider string, key crypto.Signer, keyBound func() bool) (bool, error) {
	changed := false
	if rs.Spec.ConsumerClusterID == nil || string(*rs.Spec.ConsumerClusterID) != r.ClusterID {
		rs.Spec.ConsumerClusterID, changed = ptr.To(authv1beta1.ClusterID(r.ClusterID)), true
	}
	if rs.Spec.ProviderClusterID == nil || string(*rs.Spec.ProviderClusterID) != provider {
		rs.Spec.ProviderClusterID, changed = ptr.To(authv1beta1.ClusterID(provider)), true
	}
	user := authn.SliceUserName(rs.Name, r.ClusterID)
	if _, err := authn.ValidateCSRFor(rs.Spec.CSR, key.Public(), user, r.ClusterID); err != nil {
		forge := authn.ForgeCSRFor
		if keyBound() {
			forge = authn.ForgeKeyBoundCSRFor
		}
		csr, err := forge(key, user, r.ClusterID)
		if err != nil {
			return false, err
		}
		rs.Spec.CSR, changed = csr, true
	}
	return changed, nil
}

// controlPlaneKey is the key of ks that the control-plane Identity with provider holds a
// certificate for (the key the provider's Tenant accepted: during a key rotation the next
// key once that provider moved, the previous one until it has), the current key when it
// holds none; and whether that certificate is key-bound (its provider moved it in a key
// rotation): the slices with that provider are then key-bound too. A slice's CSR is for
// that key, so that a slice keeps its grant while its provider is between two keys.
func (r *Reconciler) controlPlaneKey(ctx context.Context, ns, provider string, ks cluster.KeySet) (crypto.Signer, bool) {
	id := &authv1beta1.Identity{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.IdentityName(provider)}, id); err != nil {
		return ks.Current, false
	}
	cert, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
	if err != nil {
		return ks.Current, false
	}
	key := ks.Holding(cert.PublicKey)
	if key == nil {
		key = ks.Current
	}
	return key, authn.CertificateKeyGroup(cert) != ""
}

// providerClient is a client of the provider as this cluster's control-plane identity
// there, and the tenant namespace it may write in.
func (r *Reconciler) providerClient(ctx context.Context, ns, provider string, ks cluster.KeySet) (client.Client, string, error) {
	id := &authv1beta1.Identity{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.IdentityName(provider)}, id); err != nil {
		return nil, "", fmt.Errorf("no control-plane Identity %s/%s: run liqoctl authenticate with provider %q first (%w)", ns, wire.IdentityName(provider), provider, err)
	}
	if id.Status.KubeconfigSecretRef == nil || id.Spec.Namespace == nil {
		return nil, "", fmt.Errorf("the control-plane Identity %s/%s has no kubeconfig yet", ns, id.Name)
	}
	var s corev1.Secret
	key := client.ObjectKey{Namespace: ns, Name: id.Status.KubeconfigSecretRef.Name}
	if err := r.Client.Get(ctx, key, &s); err != nil {
		return nil, "", err
	}
	kubeconfig := s.Data[wire.KubeconfigField]
	// The client stands for a check of this kubeconfig against these pins (the CA and the
	// proxy): any of them changing makes a new check.
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil || rec == nil {
		return nil, "", fmt.Errorf("no tenant record of provider %q: %w", provider, err)
	}
	// The copies are where the handshake pinned this cluster's tenant namespace on the
	// provider, whatever an Identity writer made the Identity say since (helper-39's F7:
	// moved, the copy was looked for elsewhere, found gone, and its grant stayed); a
	// peering older than the pin keeps its Identity's.
	remoteNS := rec.ProviderNamespaceOr(*id.Spec.Namespace)
	hash := pinnedKubeconfigHash(kubeconfig, rec)
	if v, ok := r.clients.Load(key); ok && v.(*providerClient).hash == hash {
		return v.(*providerClient).client, remoteNS, nil
	}
	cfg, err := providerclient.ProviderConfig(ctx, r.Client, r.Placement.LiqoNamespace, kubeconfigKey(ks, kubeconfig), r.ClusterID, id, kubeconfig, r.Now())
	if err != nil {
		return nil, "", fmt.Errorf("the control-plane kubeconfig is refused: %w", err)
	}
	cfg.Timeout = providerRequestTimeout
	c, err := providerclient.New(cfg, r.Scheme)
	if err != nil {
		return nil, "", err
	}
	r.clients.Store(key, &providerClient{hash: hash, client: c})
	return c, remoteNS, nil
}

// pinnedKubeconfigHash identifies a kubeconfig checked against the pins of rec (its CA,
// its proxy or none, nothing pinned being none): the same hash, the same decision.
func pinnedKubeconfigHash(kubeconfig []byte, rec *cluster.TenantRecord) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range [][]byte{kubeconfig, []byte(rec.CAFingerprint), []byte(rec.PinnedProxy())} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// kubeconfigKey is the key of ks that the kubeconfig holds (during a key rotation the
// control-plane certificate can be for the previous, current or next key), or the current
// one when it holds none of them: ProviderConfig then refuses it.
func kubeconfigKey(ks cluster.KeySet, kubeconfig []byte) crypto.Signer {
	info, err := authn.ReadKubeconfig(kubeconfig)
	if err != nil {
		return ks.Current
	}
	held, err := authn.ParsePrivateKey(info.KeyPEM)
	if err != nil {
		return ks.Current
	}
	if k := ks.Holding(held.Public()); k != nil {
		return k
	}
	return ks.Current
}

// errNotACopy says that the slice of that name in the provider's tenant namespace is
// not this cluster's copy: not labelled as a copy (liqo.io/replicated=true), not
// finalized by the provider, and not the copy this cluster made (its tenant record's
// SliceCopies). It is the provider's own request of this cluster in a two-way peering,
// the two made at once under one name before either copy arrived (as two GitOps
// repositories may): neither written to, nor read as the provider's answer, nor deleted
// with the slice.
var errNotACopy = errors.New("is not this cluster's copy: it carries no label " + wire.ReplicationStatusLabel + "=true and is not the copy this cluster made (the provider's own request of this cluster in a two-way peering)")

// MaxSliceCopies is the most slices whose copies on one provider the tenant record keeps
// (about 110 bytes each): a slice writer asking for more is refused before a copy is
// made, so that no number of slices fills the record, which holds this cluster's pins of
// that provider too. The provider grants a tenant's slices far below it (64 by default).
const MaxSliceCopies = 1024

// errTooManyCopies refuses a slice's copy when the tenant record keeps MaxSliceCopies.
var errTooManyCopies = fmt.Errorf("this cluster keeps the copies of at most %d slices per provider: delete the slices no longer needed", MaxSliceCopies)

// isCopy says whether the provider takes rs for a consumer's copy, as its slice
// controller decides (access.SliceConsumer: the label; a request of its own has none).
func isCopy(rs *authv1beta1.ResourceSlice) bool {
	_, providerCopy := access.SliceConsumer(rs)
	return providerCopy
}

// ours says whether cp, of slice name's name in the provider's tenant namespace, is this
// cluster's to write, read and delete: a copy, one the provider still finalizes, or the
// copy this cluster made (rec.SliceCopies, by UID), whatever its labels say now: a writer
// there who took the label off may put it back once the slice is gone, and the provider
// would grant it again (helper-52).
func ours(name string, cp *authv1beta1.ResourceSlice, rec *cluster.TenantRecord) bool {
	if isCopy(cp) || controllerutil.ContainsFinalizer(cp, wire.ProviderSliceFinalizer) {
		return true
	}
	return rec != nil && cp.UID != "" && rec.SliceCopies[name] == cp.UID
}

// copyLabels are the labels of the copy consumer makes of its slice on the provider, as
// Liqo's replicator labels what it copies: replicated, from consumer, not a request there.
func copyLabels(consumer string) map[string]string {
	return map[string]string{wire.RemoteClusterIDLabel: consumer, wire.ReplicationRequestedLabel: "false",
		wire.ReplicationStatusLabel: "true", wire.ReplicationOriginLabel: consumer}
}

// sync writes the slice's spec into the provider's tenant namespace (creating it there),
// as Liqo's replicator does, and returns the provider's copy; a copy it creates is
// recorded in the tenant record of provider (or deleted again when it cannot be). A slice
// of that name there that is not this cluster's is left alone (errNotACopy).
func (r *Reconciler) sync(ctx context.Context, rs *authv1beta1.ResourceSlice, provider string, remote client.Client, ns string) (*authv1beta1.ResourceSlice, error) {
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return nil, err
	}
	cp := &authv1beta1.ResourceSlice{}
	err = remote.Get(ctx, client.ObjectKey{Namespace: ns, Name: rs.Name}, cp)
	if apierrors.IsNotFound(err) {
		return r.createCopy(ctx, rs, rec, provider, remote, ns)
	}
	if err != nil {
		return nil, err
	}
	if !ours(rs.Name, cp, rec) {
		return nil, errNotACopy
	}
	if !equality.Semantic.DeepEqual(cp.Spec, rs.Spec) {
		cp.Spec = *rs.Spec.DeepCopy()
		err = remote.Update(ctx, cp)
	}
	return cp, err
}

// createCopy makes the copy of rs in the provider's tenant namespace ns and records its
// UID in the tenant record of provider (rec, as read): only a copy this cluster created
// is recorded, never one it found there, whose labels whoever may write it there chose
// for a moment (helper-54: the provider's own request, labelled as a copy once, was then
// deleted with the slice). A copy that cannot be recorded is deleted again, by its UID:
// none stays unrecorded, which a writer there could unlabel to keep past the slice.
func (r *Reconciler) createCopy(ctx context.Context, rs *authv1beta1.ResourceSlice, rec *cluster.TenantRecord, provider string, remote client.Client, ns string) (*authv1beta1.ResourceSlice, error) {
	live, err := r.liveSlices(ctx, rs.Namespace)
	if err != nil {
		return nil, err
	}
	if n := countLive(rec, live); n >= MaxSliceCopies && (rec == nil || rec.SliceCopies[rs.Name] == "") {
		return nil, errTooManyCopies
	}
	cp := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rs.Name, Labels: copyLabels(r.ClusterID)}, Spec: *rs.Spec.DeepCopy()}
	if err := remote.Create(ctx, cp); err != nil {
		return cp, err
	}
	if err := r.recordCopy(ctx, provider, rs.Namespace, rs.Name, cp.UID); err != nil {
		uid := cp.UID
		undo := remote.Delete(ctx, cp, client.Preconditions{UID: &uid})
		return nil, fmt.Errorf("recording the copy in the tenant record of %q: %w", provider, errors.Join(err, client.IgnoreNotFound(undo)))
	}
	return cp, nil
}

// liveSlices are the names of the slices of tenant namespace ns.
func (r *Reconciler) liveSlices(ctx context.Context, ns string) (map[string]bool, error) {
	var list authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		live[list.Items[i].Name] = true
	}
	return live, nil
}

// countLive counts the copies rec keeps of slices that are still there: an entry whose
// slice went without its finalize (its finalizer stripped, its provider label changed)
// counts for nothing, and is dropped at the next record.
func countLive(rec *cluster.TenantRecord, live map[string]bool) int {
	if rec == nil {
		return 0
	}
	n := 0
	for name := range rec.SliceCopies {
		if live[name] {
			n++
		}
	}
	return n
}

// recordBackoff bounds recordCopy's retries: the tenant record is one object per
// provider, which the slice controller's workers (a slice writer's many slices at once)
// and the pins write at once, each read from a cache that may lag the last write. About
// two seconds at most, while the provider's lock is held.
var recordBackoff = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: time.Second}

// recordCopy keeps uid as the copy of slice name on provider in its tenant record
// (SliceCopies), dropping the entries of slices no longer in tenant namespace ns; an empty
// uid forgets the slice's, and drops nothing. Writes of the record by the slice
// controller's workers are serialized per provider, and a conflict is retried along
// recordBackoff. The slices there are listed inside the lock, at each try: a list read
// before another worker recorded its new slice would drop that slice's entry (helper-55).
func (r *Reconciler) recordCopy(ctx context.Context, provider, ns, name string, uid types.UID) error {
	mu, _ := r.recordLocks.LoadOrStore(provider, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	return retry.OnError(recordBackoff, apierrors.IsConflict, func() error {
		var live map[string]bool
		if uid != "" {
			var err error
			if live, err = r.liveSlices(ctx, ns); err != nil {
				return err
			}
		}
		return cluster.UpdateTenantRecord(ctx, r.Client, r.Client, r.Placement.LiqoNamespace, provider, false, func(rec *cluster.TenantRecord) error {
			if uid == "" {
				delete(rec.SliceCopies, name)
				return nil
			}
			for n := range rec.SliceCopies {
				if !live[n] && n != name {
					delete(rec.SliceCopies, n)
				}
			}
			if rec.SliceCopies == nil {
				rec.SliceCopies = map[string]types.UID{}
			}
			rec.SliceCopies[name] = uid
			return nil
		})
	})
}

// ensureIdentity turns an accepted answer into the slice's Identity, controlled by the
// slice; a denied slice has none. The Identity reaches the provider as the control-plane
// Identity does: its API server is that Identity's and its proxy the one this cluster
// pinned for the provider (none while none is), never the answer's, which
// whoever may write the status of the provider's copy writes too (the proxy is the
// consumer's own choice, and a status writer's would route the slice's traffic through a
// host of its choosing).
func (r *Reconciler) ensureIdentity(ctx context.Context, rs *authv1beta1.ResourceSlice, provider, remoteNS string) error {
	key := client.ObjectKey{Namespace: rs.Namespace, Name: wire.SliceIdentityName(rs.Name)}
	if accepted, _ := authv1beta1.SliceVerdict(rs.Status.Conditions); !accepted || !rs.Status.AuthParams.HasCertificate() {
		id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		return client.IgnoreNotFound(ownedrbac.DeleteControlled(ctx, r.Client, r.Client, rs, []client.Object{id}))
	}
	cp := &authv1beta1.Identity{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: wire.IdentityName(provider)}, cp); err != nil {
		return err
	}
	params := rs.Status.AuthParams.DeepCopy()
	params.APIServer, params.ProxyURL = cp.Spec.AuthParams.APIServer, nil
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return err
	}
	// The proxy this cluster pinned, whoever wrote the control-plane Identity; none when
	// none is pinned, as the identity controller takes no other (CheckIdentityProxy).
	if proxy := rec.PinnedProxy(); proxy != "" {
		params.ProxyURL = ptr.To(proxy)
	}
	id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, id, func() error {
		if ref := metav1.GetControllerOf(id); ref != nil && ref.UID != rs.UID {
			return fmt.Errorf("Identity %s is controlled by another object", key) //nolint:staticcheck // ST1005: the message starts with the kind's name
		}
		if id.Labels == nil {
			id.Labels = map[string]string{}
		}
		id.Labels[wire.RemoteClusterIDLabel], id.Labels[wire.SliceNameLabel] = provider, rs.Name
		id.Spec = authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(provider), Type: authv1beta1.ResourceSliceIdentityType,
			AuthParams: *params, Namespace: ptr.To(remoteNS)}
		return controllerutil.SetControllerReference(rs, id, r.Scheme)
	})
	return err
}

// errProviderRemoving says that the provider has yet to remove its copy of a slice.
var errProviderRemoving = errors.New("waiting for the provider to remove its copy of the ResourceSlice")

// finalize deletes the slice's copy on the provider (which removes its access there),
// waits for it to be gone, and lets the slice go; its Identity goes with it.
func (r *Reconciler) finalize(ctx context.Context, rs *authv1beta1.ResourceSlice, remote client.Client, ns string, remoteErr error) error {
	if !controllerutil.ContainsFinalizer(rs, wire.ConsumerSliceFinalizer) {
		return nil
	}
	provider := rs.Labels[wire.RemoteClusterIDLabel]
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return err
	}
	if remoteErr == nil {
		if err := r.removeCopy(ctx, rs, rec, remote, ns); err != nil {
			return err
		}
	} else {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonNoControlPlane, "DeleteResourceSlice",
			"the slice's copy on the provider cannot be removed from here (%v): the provider's Tenant controls what it granted", remoteErr)
	}
	id := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: wire.SliceIdentityName(rs.Name)}}
	if err := ownedrbac.DeleteControlled(ctx, r.Client, r.Client, rs, []client.Object{id}); err != nil {
		return err
	}
	if rec != nil && rec.SliceCopies[rs.Name] != "" {
		if err := r.recordCopy(ctx, provider, rs.Namespace, rs.Name, ""); err != nil {
			return err
		}
	}
	return r.removeFinalizer(ctx, rs)
}

// removeCopy deletes the slice's copy in the provider's tenant namespace ns: nil once it
// grants nothing (gone, or held by someone else's finalizer after the provider's
// finalize, or none of this cluster's there), errProviderRemoving while the provider
// finalizes it.
func (r *Reconciler) removeCopy(ctx context.Context, rs *authv1beta1.ResourceSlice, rec *cluster.TenantRecord, remote client.Client, ns string) error {
	cp := &authv1beta1.ResourceSlice{}
	err := remote.Get(ctx, client.ObjectKey{Namespace: ns, Name: rs.Name}, cp)
	switch {
	case err == nil && !ours(rs.Name, cp, rec):
		// Not a copy, nor one the provider still finalizes, nor the one this cluster made
		// (relabelled after its grant, which the label put back would grant again):
		// someone else's slice of that name, never deleted from here.
	case err == nil && cp.DeletionTimestamp == nil:
		if deleteErr := remote.Delete(ctx, cp); client.IgnoreNotFound(deleteErr) != nil {
			return deleteErr
		}
		return errProviderRemoving
	case err == nil && controllerutil.ContainsFinalizer(cp, wire.ProviderSliceFinalizer):
		return errProviderRemoving
	case err == nil:
		// Being deleted, the provider's finalize done (its grant removed): a finalizer of
		// someone else's (the tenant writes its copies) holds the copy, not its access, and
		// never this slice's deletion (helper-39's F1). It is said, once, as the slice
		// goes: the copy stays on the provider until its administrator lets it go
		// (helper-41).
		if len(cp.Finalizers) > 0 {
			r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonSliceCopyHeld, "DeleteResourceSlice",
				"the slice's copy %s/%s on provider %q grants nothing any more (the provider's finalize is done) but stays there, held by %s: the provider's administrator removes them",
				ns, rs.Name, rs.Labels[wire.RemoteClusterIDLabel], describeFinalizers(cp.Finalizers))
		}
	case !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err):
		return err
	}
	return nil
}

// deleting finalizes a deleted slice, or waits for the provider to remove its copy.
func (r *Reconciler) deleting(ctx context.Context, rs *authv1beta1.ResourceSlice, remote client.Client, remoteNS string, remoteErr error) (ctrl.Result, error) {
	if err := r.finalize(ctx, rs, remote, remoteNS, remoteErr); !errors.Is(err, errProviderRemoving) {
		return ctrl.Result{}, err
	}
	// Read back shortly, at a steady pace: returned as an error, the wait would grow by
	// the queue's failure backoff, doubling up to seconds.
	return ctrl.Result{RequeueAfter: providerRemovalPoll}, nil
}

// addFinalizer puts the finalizer on a slice in its place before anything is written to
// the provider: its copy there is removed with it.
func (r *Reconciler) addFinalizer(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	if controllerutil.ContainsFinalizer(rs, wire.ConsumerSliceFinalizer) {
		return nil
	}
	patch := client.MergeFrom(rs.DeepCopy())
	controllerutil.AddFinalizer(rs, wire.ConsumerSliceFinalizer)
	return r.Client.Patch(ctx, rs, patch)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	if !controllerutil.ContainsFinalizer(rs, wire.ConsumerSliceFinalizer) {
		return nil
	}
	patch := client.MergeFrom(rs.DeepCopy())
	controllerutil.RemoveFinalizer(rs, wire.ConsumerSliceFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, rs, patch))
}

// describeFinalizers names the finalizers that hold a copy, for an Event: whoever writes the
// copy chose them, so a few are quoted and the rest counted.
func describeFinalizers(fs []string) string {
	const shown = 3
	q := make([]string, 0, shown)
	for i, f := range fs {
		if i == shown {
			break
		}
		q = append(q, strconv.Quote(f))
	}
	switch {
	case len(fs) == 1:
		return "finalizer " + q[0]
	case len(fs) > shown:
		return fmt.Sprintf("finalizers %s and %d more", strings.Join(q, ", "), len(fs)-shown)
	}
	return "finalizers " + strings.Join(q, ", ")
}
