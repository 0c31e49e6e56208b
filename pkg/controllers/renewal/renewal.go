// Package renewal is the consumer controller that picks up renewed certificates. For each
// control-plane Identity it watches, through the identity itself, the consumer's own
// Tenant on the provider (the only object its tenant-reader role lets it read). When the
// provider publishes a newer certificate, it checks it against this cluster's key and the
// Identity's CA and puts it in the Identity, whose controller rewrites the kubeconfig. No
// cross-cluster replication machinery is involved.
package renewal

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/common"
)

// Reasons of the Events of this controller.
const (
	ReasonCertificateRenewed = "CertificateRenewed"
	ReasonRenewalRefused     = "RenewedCertificateRefused"
	ReasonProviderUnreadable = "ProviderTenantUnreadable"
	ReasonKubeconfigRefused  = "KubeconfigRefused"
)

// Reconciler keeps one watcher per control-plane Identity.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Scheme   *runtime.Scheme
	// LiqoNamespace holds the tenant records with the pinned provider CAs.
	LiqoNamespace string
	ClusterID     string
	Key           crypto.Signer
	Now           func() time.Time

	mu       sync.Mutex
	ctx      context.Context
	watchers map[types.NamespacedName]*watcher
}

type watcher struct {
	kubeconfigHash [32]byte
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
	return ctrl.NewControllerManagedBy(mgr).Named("renewal").
		WatchesRawSource(common.For(mgr, &authv1beta1.Identity{})).
		WatchesRawSource(common.Watch(mgr.GetCache(), &corev1.Secret{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &authv1beta1.Identity{}))).
		WatchesRawSource(common.Watch(mgr.GetCache(), &corev1.ConfigMap{}, common.OnTenantRecord(cluster.IdentityName), common.HasLabel(cluster.TenantRecordLabel, "true"))).
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
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Status.KubeconfigSecretRef.Name}, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	kubeconfig := s.Data[cluster.KubeconfigField]
	hash := sha256.Sum256(kubeconfig)
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
	cfg, err := r.restConfig(ctx, id, kubeconfig)
	if err != nil {
		delete(r.watchers, req.NamespacedName)
		r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, ReasonKubeconfigRefused, "WatchRenewals",
			"renewals are not watched: the kubeconfig Secret %s is not the one liqo-auth wrote for this Identity: %v", s.Name, err)
		return ctrl.Result{}, nil
	}
	wctx, cancel := context.WithCancel(r.ctx)
	r.watchers[req.NamespacedName] = &watcher{kubeconfigHash: hash, cancel: cancel}
	go r.watch(log.IntoContext(wctx, log.FromContext(ctx)), req.NamespacedName, cfg, ptr.Deref(id.Spec.Namespace, ""))
	return ctrl.Result{}, nil
}

// restConfig builds the client configuration of an identity from the fields liqo-auth
// writes in its kubeconfig, and only those: the server, its CA, the proxy, the client
// certificate and key. Whoever may write the Secret could have put anything else there
// (exec plugins, token files, auth providers), so the kubeconfig is only parsed, never
// loaded; it must agree with the Identity, hold this cluster's own key and a certificate
// for it, and present the provider CA pinned in this cluster's tenant record.
func (r *Reconciler) restConfig(ctx context.Context, id *authv1beta1.Identity, kubeconfig []byte) (*rest.Config, error) {
	info, err := authn.ReadKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	ap := id.Spec.AuthParams
	switch {
	case info.Server != ap.APIServer:
		return nil, fmt.Errorf("it points at %q, the Identity at %q", info.Server, ap.APIServer)
	case !bytes.Equal(info.CA, ap.CA):
		return nil, fmt.Errorf("its CA is not the Identity's")
	case info.ProxyURL != ptr.Deref(ap.ProxyURL, ""):
		return nil, fmt.Errorf("its proxy %q is not the Identity's", info.ProxyURL)
	}
	if err := authn.ValidateServerURL(info.Server); err != nil {
		return nil, err
	}
	key, err := authn.ParsePrivateKey(info.KeyPEM)
	if err != nil {
		return nil, err
	}
	if !authn.PublicKeysEqual(key.Public(), r.Key.Public()) {
		return nil, fmt.Errorf("it holds another key than this cluster's")
	}
	if _, err := authn.VerifyCertificate(info.CertPEM, info.CA, r.Key.Public(), r.ClusterID, r.Now()); err != nil {
		return nil, err
	}
	fp, err := authn.CAFingerprint(info.CA)
	if err != nil {
		return nil, err
	}
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.LiqoNamespace, string(id.Spec.ClusterID))
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.CAFingerprint != fp {
		return nil, fmt.Errorf("its CA %s is not the one pinned for provider %q", fp, id.Spec.ClusterID)
	}
	cfg := &rest.Config{Host: info.Server, TLSClientConfig: rest.TLSClientConfig{CAData: info.CA, CertData: info.CertPEM, KeyData: info.KeyPEM}}
	if info.ProxyURL != "" {
		u, err := url.Parse(info.ProxyURL)
		if err != nil {
			return nil, err
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	return cfg, nil
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
func (r *Reconciler) watch(ctx context.Context, key types.NamespacedName, cfg *rest.Config, ns string) {
	logger := log.FromContext(ctx).WithValues("identity", key)
	remote, err := client.NewWithWatch(cfg, client.Options{Scheme: r.Scheme})
	if err != nil {
		r.report(ctx, key, fmt.Errorf("creating a client for the provider: %w", err))
		return
	}
	sel := []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": r.ClusterID}}
	const first, most = time.Second, 30 * time.Second
	backoff, lastReported := first, ""
	for ctx.Err() == nil {
		established, err := r.follow(ctx, remote, key, sel)
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
	r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, ReasonProviderUnreadable, "WatchRenewals",
		"renewed certificates cannot be picked up: reading Tenant %s on provider %s failed: %v", r.ClusterID, id.Spec.ClusterID, err)
}

// follow lists and then watches the consumer's Tenant on the provider, picking up each
// newer certificate, until the watch ends. established says the list succeeded.
func (r *Reconciler) follow(ctx context.Context, remote client.WithWatch, key types.NamespacedName, sel []client.ListOption) (established bool, err error) {
	var list authv1beta1.TenantList
	if err := remote.List(ctx, &list, sel...); err != nil {
		return false, err
	}
	for i := range list.Items {
		r.pickUp(ctx, key, &list.Items[i])
	}
	w, err := remote.Watch(ctx, &list, append(sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return true, fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
		case watch.Added, watch.Modified:
			if t, ok := ev.Object.(*authv1beta1.Tenant); ok {
				r.pickUp(ctx, key, t)
			}
		}
	}
	return true, fmt.Errorf("watch closed")
}

// pickUp moves a newer certificate from the provider's Tenant into the Identity, after
// checking it.
func (r *Reconciler) pickUp(ctx context.Context, key types.NamespacedName, t *authv1beta1.Tenant) {
	ap := t.Status.AuthParams
	if ap == nil || len(ap.SignedCRT) == 0 {
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
		next, err := authn.VerifyCertificate(ap.SignedCRT, id.Spec.AuthParams.CA, r.Key.Public(), r.ClusterID, r.Now())
		if err != nil {
			r.Recorder.Eventf(id, nil, corev1.EventTypeWarning, ReasonRenewalRefused, "PickUpCertificate", "the provider published a certificate this cluster refuses: %v", err)
			return nil
		}
		if cur, err := authn.ParseCertificate(id.Spec.AuthParams.SignedCRT); err == nil && !next.NotAfter.After(cur.NotAfter) {
			return nil // not newer than what the Identity holds
		}
		id.Spec.AuthParams.SignedCRT = ap.SignedCRT
		if err := r.Client.Update(ctx, id); err != nil {
			return err
		}
		r.Recorder.Eventf(id, nil, corev1.EventTypeNormal, ReasonCertificateRenewed, "PickUpCertificate",
			"picked up certificate %s, valid until %s, from provider %s", next.SerialNumber.Text(16), next.NotAfter.UTC().Format(time.RFC3339), id.Spec.ClusterID)
		return nil
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "updating the Identity with the renewed certificate")
	}
}
