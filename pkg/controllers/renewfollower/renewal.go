// Package renewfollower is the consumer controller that picks up renewed certificates. For each
// control-plane Identity it watches, through the identity itself, the consumer's own
// Tenant on the provider (the only object its tenant-reader role lets it read), or, on a
// provider that does not let it (Liqo), its Renew there: Liqo's renewal channel. When the
// provider publishes a newer certificate, it checks it against this cluster's key and the
// Identity's CA and puts it in the Identity, whose controller rewrites the kubeconfig. No
// cross-cluster replication machinery is involved.
package renewfollower

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/providerclient"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler keeps one watcher per control-plane Identity.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Scheme   *runtime.Scheme
	// LiqoNamespace holds the tenant records with the pinned provider CAs.
	LiqoNamespace string
	ClusterID     string
	// Keys are this cluster's keys as they are now (a rotation changes them): a renewed
	// certificate is taken only for the key that holds the Identity's certificate.
	Keys cluster.KeySource
	// PresenceInterval is how often the consumer renews its presence Lease on each
	// provider (DefaultPresenceInterval when 0).
	PresenceInterval time.Duration
	Now              func() time.Time

	mu       sync.Mutex
	ctx      context.Context
	watchers map[types.NamespacedName]*watcher
}

type watcher struct {
	kubeconfigHash [32]byte // of the tenant namespace followed and the kubeconfig
	cancel         context.CancelFunc
}

// SetupWithManager registers the reconciler, and itself as a runnable that owns the
// lifetime of the watchers.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	r.watchers = map[types.NamespacedName]*watcher{}
	if err := mgr.Add(r); err != nil {
		return err
	}
	return wiring.NewController(mgr, "renewfollower", access.Consumer).
		For(&authv1beta1.Identity{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &authv1beta1.Identity{})).
		Watches(&corev1.ConfigMap{}, wiring.OnTenantRecord(wire.IdentityName), wiring.HasLabel(wire.TenantRecordLabel, "true")).
		Complete(r)
}

// Start holds the watchers' context for the manager's lifetime and stops them at the end:
// no watcher runs before it, nor after.
func (r *Reconciler) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, w := range r.watchers {
		w.cancel()
		delete(r.watchers, k)
	}
	return nil
}

// Reconcile starts, restarts (when the kubeconfig changed) or stops the watcher of one
// Identity.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	id := &authv1beta1.Identity{}
	err := r.Client.Get(ctx, req.NamespacedName, id)
	if apierrors.IsNotFound(err) || (err == nil && (id.DeletionTimestamp != nil || id.Spec.Type != authv1beta1.ControlPlaneIdentityType || id.Status.KubeconfigSecretRef == nil)) {
		r.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	var s corev1.Secret
	if getErr := r.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Status.KubeconfigSecretRef.Name}, &s); getErr != nil {
		return ctrl.Result{}, client.IgnoreNotFound(getErr)
	}
	kubeconfig := s.Data[wire.KubeconfigField]
	// The watcher follows this kubeconfig where this namespace says: either changing
	// restarts it.
	ns, err := r.providerNamespace(ctx, id)
	if err != nil {
		return ctrl.Result{}, err
	}
	hash := followHash(ns, kubeconfig)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		// The manager runs controllers and runnables side by side: the watchers' lifetime
		// (Start) may begin a moment after the first reconcile.
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if w, ok := r.watchers[req.NamespacedName]; ok {
		if w.kubeconfigHash == hash {
			return ctrl.Result{}, nil
		}
		w.cancel()
	}
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	cfg, err := providerclient.ProviderConfigFor(ctx, r.Client, r.LiqoNamespace, ks, r.ClusterID, id, kubeconfig, r.Now())
	if err != nil {
		delete(r.watchers, req.NamespacedName)
		r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, authv1beta1.ReasonKubeconfigRefused, "WatchRenewals",
			"renewals are not watched: the kubeconfig Secret %s is not the one liqo-auth wrote for this Identity: %v", s.Name, err)
		return ctrl.Result{}, nil
	}
	wctx, cancel := context.WithCancel(r.ctx)
	r.watchers[req.NamespacedName] = &watcher{kubeconfigHash: hash, cancel: cancel}
	wctx = log.IntoContext(wctx, log.FromContext(ctx))
	// One client to the provider, for following the Tenant and renewing the presence.
	remote, err := providerclient.New(cfg, r.Scheme)
	if err != nil {
		r.report(wctx, req.NamespacedName, fmt.Errorf("creating a client for the provider: %w", err))
		return ctrl.Result{}, nil
	}
	go r.watch(wctx, req.NamespacedName, remote, ns, identityKey(ks, id))
	go r.renewPresence(wctx, remote, ns)
	return ctrl.Result{}, nil
}

// followHash identifies a watcher's kubeconfig and the tenant namespace it follows.
func followHash(ns string, kubeconfig []byte) [sha256.Size]byte {
	return sha256.Sum256(append(append([]byte(ns), 0), kubeconfig...))
}

// providerNamespace is this cluster's tenant namespace on id's provider, where its Tenant
// and its presence are: the one a handshake pinned in the tenant record, not where an
// Identity writer moved spec.namespace; the Identity's for a peering older than the pin.
func (r *Reconciler) providerNamespace(ctx context.Context, id *authv1beta1.Identity) (string, error) {
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.LiqoNamespace, string(id.Spec.ClusterID))
	if err != nil {
		return "", err
	}
	return rec.ProviderNamespaceOr(ptr.Deref(id.Spec.Namespace, "")), nil
}

// DefaultPresenceInterval is how often a consumer renews its presence Lease on a provider.
const DefaultPresenceInterval = time.Minute

// renewPresence renews, with the identity itself, the consumer's presence Lease in its
// tenant namespace ns on the provider until ctx ends. A provider that does not let it
// (Liqo's controllers) is asked again ten intervals later; one that keeps no Lease (it does
// not collect consumers that are gone) each interval, for it may start to.
func (r *Reconciler) renewPresence(ctx context.Context, remote client.Client, ns string) {
	interval := r.PresenceInterval
	if interval <= 0 {
		interval = DefaultPresenceInterval
	}
	logger := log.FromContext(ctx).WithValues("lease", ns+"/"+wire.PresenceLeaseName)
	for {
		next := interval
		lease := &coordinationv1.Lease{}
		err := remote.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.PresenceLeaseName}, lease)
		if err == nil {
			orig := lease.DeepCopy()
			lease.Spec.HolderIdentity = ptr.To(r.ClusterID)
			lease.Spec.RenewTime = &metav1.MicroTime{Time: r.Now()}
			err = remote.Patch(ctx, lease, client.MergeFrom(orig))
		}
		switch {
		case apierrors.IsForbidden(err):
			next = 10 * interval
			logger.V(1).Info("the provider lets this consumer renew no presence Lease", "error", err.Error())
		case apierrors.IsNotFound(err):
			logger.V(1).Info("the provider keeps no presence Lease for this consumer (yet)")
		case err != nil && ctx.Err() == nil:
			logger.V(1).Info("renewing the presence Lease failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// identityKey is the key of ks that holds the Identity's certificate, the current key when
// none does (the kubeconfig was checked: it holds one of them).
func identityKey(ks cluster.KeySet, id *authv1beta1.Identity) crypto.Signer {
	if cert, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT); err == nil {
		if k := ks.Holding(cert.PublicKey); k != nil {
			return k
		}
	}
	return ks.Current
}

func (r *Reconciler) stop(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.watchers[key]; ok {
		w.cancel()
		delete(r.watchers, key)
	}
}

// watch follows the consumer's Tenant on the provider until ctx ends, reconnecting with
// backoff on errors.
func (r *Reconciler) watch(ctx context.Context, key types.NamespacedName, remote client.WithWatch, ns string, signer crypto.Signer) {
	logger := log.FromContext(ctx).WithValues("identity", key)
	sel := []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": r.ClusterID}}
	const first, most = time.Second, 30 * time.Second
	backoff, lastReported := first, ""
	for ctx.Err() == nil {
		established, err := r.follow(ctx, remote, key, &authv1beta1.TenantList{}, sel)
		if apierrors.IsForbidden(err) {
			// A provider that lets a tenant not read its Tenant (Liqo) answers through
			// Liqo's Renew channel.
			established, err = r.followRenew(ctx, remote, key, ns, signer)
		}
		if ctx.Err() != nil {
			return
		}
		if established {
			// The watch worked and ended (API servers end watches every few minutes):
			// reconnect at once, and start over with short waits.
			backoff, lastReported = first, ""
		} else if msg := err.Error(); msg != lastReported {
			r.report(ctx, key, err)
			lastReported = msg
		}
		logger.V(1).Info("watching the Tenant on the provider ended; reconnecting", "error", err.Error(), "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if !established {
			backoff = min(2*backoff, most)
		}
	}
}

// report records, on the Identity, why its Tenant on the provider cannot be followed.
func (r *Reconciler) report(ctx context.Context, key types.NamespacedName, err error) {
	id := &authv1beta1.Identity{}
	if r.Client.Get(ctx, key, id) != nil {
		return
	}
	r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, authv1beta1.ReasonProviderUnreadable, "WatchRenewals",
		"renewed certificates cannot be picked up: following Tenant %s (or its Renew) on provider %s failed: %v", r.ClusterID, id.Spec.ClusterID, err)
}

// follow lists and then watches one object on the provider (the consumer's Tenant, or its
// Renew), picking up each newer certificate it publishes, until the watch ends.
// established says the list succeeded.
func (r *Reconciler) follow(ctx context.Context, remote client.WithWatch, key types.NamespacedName, list client.ObjectList, sel []client.ListOption) (established bool, err error) {
	if listErr := remote.List(ctx, list, sel...); listErr != nil {
		return false, listErr
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return false, err
	}
	for _, it := range items {
		r.pickUp(ctx, key, published(it))
	}
	w, err := remote.Watch(ctx, list, append(sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})...)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return true, fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
		case watch.Added, watch.Modified:
			r.pickUp(ctx, key, published(ev.Object))
		}
	}
	return true, fmt.Errorf("watch closed")
}

// published is the authentication parameters a Tenant or a Renew publishes.
func published(o runtime.Object) *authv1beta1.AuthParams {
	switch o := o.(type) {
	case *authv1beta1.Tenant:
		return o.Status.AuthParams
	case *authv1beta1.Renew:
		return o.Status.AuthParams
	}
	return nil
}

// followRenew keeps the consumer's Renew in its tenant namespace ns on the provider,
// named after the Identity as Liqo's consumer names it, and follows its answer.
func (r *Reconciler) followRenew(ctx context.Context, remote client.WithWatch, key types.NamespacedName, ns string, signer crypto.Signer) (bool, error) {
	rn := &authv1beta1.Renew{}
	err := remote.Get(ctx, client.ObjectKey{Namespace: ns, Name: key.Name}, rn)
	if apierrors.IsNotFound(err) {
		if rn, err = r.forgeRenew(ns, key.Name, signer); err == nil {
			err = remote.Create(ctx, rn)
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("keeping the Renew %s/%s on the provider: %w", ns, key.Name, err)
	}
	return r.follow(ctx, remote, key, &authv1beta1.RenewList{}, []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": key.Name}})
}

// forgeRenew is the Renew this consumer keeps on a provider, as Liqo's replicator writes
// it there: its cluster ID, identity type, public key and a CSR of that key (which older
// Liqo providers sign; newer ones answer with the Tenant's renewed certificate).
func (r *Reconciler) forgeRenew(ns, name string, signer crypto.Signer) (*authv1beta1.Renew, error) {
	pub, err := authn.MarshalPublicKey(signer.Public())
	if err != nil {
		return nil, err
	}
	csr, err := authn.ForgeCSR(signer, r.ClusterID)
	if err != nil {
		return nil, err
	}
	return &authv1beta1.Renew{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			wire.RemoteClusterIDLabel: r.ClusterID, wire.ReplicationRequestedLabel: "false",
			wire.ReplicationStatusLabel: "true", wire.ReplicationOriginLabel: r.ClusterID}},
		Spec: authv1beta1.RenewSpec{ConsumerClusterID: authv1beta1.ClusterID(r.ClusterID), IdentityType: authv1beta1.ControlPlaneIdentityType, PublicKey: pub, CSR: csr},
	}, nil
}

// heldKey is the public key of the certificate the Identity holds, when one of this
// cluster's keys holds it (nil otherwise); the current key when the Identity holds no
// readable certificate.
func (r *Reconciler) heldKey(ctx context.Context, id *authv1beta1.Identity) (crypto.PublicKey, error) {
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return nil, err
	}
	cur, parseErr := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT)
	if parseErr != nil {
		return ks.Current.Public(), nil //nolint:nilerr // no readable certificate: a renewed one is taken for the current key
	}
	if k := ks.Holding(cur.PublicKey); k != nil {
		return k.Public(), nil
	}
	return nil, nil
}

// anotherOfOurKeys says whether certPEM is a certificate for one of this cluster's keys.
func (r *Reconciler) anotherOfOurKeys(ctx context.Context, certPEM []byte) bool {
	cert, err := authn.ParseCertificate(certPEM)
	if err != nil {
		return false
	}
	ks, err := r.Keys.Keys(ctx)
	return err == nil && ks.Holding(cert.PublicKey) != nil
}

// pickUp moves a newer certificate from the provider's Tenant into the Identity, after
// checking it.
func (r *Reconciler) pickUp(ctx context.Context, key types.NamespacedName, ap *authv1beta1.AuthParams) {
	if !ap.HasCertificate() {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		id := &authv1beta1.Identity{}
		if err := r.Client.Get(ctx, key, id); err != nil {
			return client.IgnoreNotFound(err)
		}
		if bytes.Equal(id.Spec.AuthParams.SignedCRT, ap.SignedCRT) {
			return nil
		}
		held, err := r.heldKey(ctx, id)
		if err != nil {
			return err
		}
		if held == nil {
			return nil // the Identity's certificate is for none of this cluster's keys: the identity controller says so
		}
		next, err := authn.VerifyCertificate(ap.SignedCRT, id.Spec.AuthParams.CA, held, r.ClusterID, r.Now())
		if authn.ReasonOf(err) == authn.ReasonCertificateKeyMismatch && r.anotherOfOurKeys(ctx, ap.SignedCRT) {
			// A certificate for another key of this cluster's: a rotation moving the
			// identity, whose driver writes it into the Identity once it checked it.
			return nil
		}
		if err != nil {
			r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, authv1beta1.ReasonRenewalRefused, "PickUpCertificate", "the provider published a certificate this cluster refuses: %v", err)
			return nil
		}
		if cur, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT); err == nil && !next.NotAfter.After(cur.NotAfter) {
			return nil // not newer than what the Identity holds
		}
		orig := id.DeepCopy()
		id.Spec.AuthParams.SignedCRT = ap.SignedCRT
		if err := r.Client.Patch(ctx, id, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		r.Recorder.Eventf(id, nil, corev1.EventTypeNormal, authv1beta1.ReasonCertificateRenewed, "PickUpCertificate",
			"picked up certificate %s, valid until %s, from provider %s", next.SerialNumber.Text(16), next.NotAfter.UTC().Format(time.RFC3339), id.Spec.ClusterID)
		return nil
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "updating the Identity with the renewed certificate")
	}
}
