// Package identity is the consumer controller of Identities: it turns an Identity into
// the kubeconfig Secret of its provider, after checking that the certificate is for one of
// this cluster's keys (the key set of the authentication-keys Secret: during a rotation the
// certificate may be for the current, the staged or the previous key, and the kubeconfig
// holds the key that holds the certificate) and for its user, chains to the given CA (and to the pinned CA, if any), and
// that the Identity sits where the protocol says. A refused Identity gets a Warning Event
// and a condition, and no kubeconfig is written.
package identity

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/status"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
)

// Reconciler reconciles Identities.
type Reconciler struct {
	Client    client.Client
	Placement placement.Placement
	Recorder  events.EventRecorder
	ClusterID string
	// Keys are this cluster's keys as they are now (a rotation changes them).
	Keys cluster.KeySource
	Now  func() time.Time
}

// SetupWithManager registers the reconciler for Identities and their kubeconfig Secrets.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := wiring.NewController(mgr, "identity", access.Consumer).
		For(&authv1beta1.Identity{}).
		// The kubeconfig Secret by its name, owned or not: deleting a Secret that blocked
		// the kubeconfig (KubeconfigSecretNotOwned) brings its Identity back.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(kubeconfigToIdentity))
	return b.WatchTenantNamespaces(wire.IdentityName).Complete(r)
}

// kubeconfigToIdentity maps a kubeconfig Secret to the Identity it is named after.
func kubeconfigToIdentity(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := strings.CutPrefix(o.GetName(), wire.KubeconfigSecretName(""))
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// Reconcile writes the kubeconfig Secret of one Identity.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	id := &authv1beta1.Identity{}
	if err := r.Client.Get(ctx, req.NamespacedName, id); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if id.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	before := id.Status.DeepCopy()
	notes := status.NewDeferred(r.Recorder)
	res, err := r.reconcile(ctx, id, notes)
	if err != nil {
		return ctrl.Result{}, err
	}
	id.Status.ObservedGeneration = id.Generation
	if saved, err := status.SaveStatus(ctx, r.Client, id, !equality.Semantic.DeepEqual(before, &id.Status)); !saved || err != nil {
		return ctrl.Result{}, err
	}
	notes.Flush()
	return res, nil
}

// reconcile computes the Identity's status and writes its kubeconfig Secret; the Events
// that announce a change of the status go to notes, recorded once the status is saved.
func (r *Reconciler) reconcile(ctx context.Context, id *authv1beta1.Identity, notes *status.Deferred) (ctrl.Result, error) {
	if reason, msg, err := r.checkPlacement(ctx, id); err != nil || reason != "" {
		return r.refuseOrFail(id, notes, reason, msg, err)
	}
	params := id.Spec.AuthParams
	now := r.Now()
	if reason, msg, err := r.checkPins(ctx, id); err != nil || reason != "" {
		return r.refuseOrFail(id, notes, reason, msg, err)
	}
	user := kubeconfigUser(id, r.ClusterID)
	kubeconfig, reason, msg, err := r.forgeKubeconfig(ctx, id, user, now)
	if err != nil || reason != "" {
		return r.refuseOrFail(id, notes, reason, msg, err)
	}
	// Both were checked by ForgeKubeconfig (and checkPinnedCA) above.
	cert, err := authn.ParseCertificate(params.SignedCRT)
	if err != nil {
		return ctrl.Result{}, err
	}
	caFP, err := authn.CAFingerprint(params.CA)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Only now, the Identity having passed every check of its own (placement, pins, key,
	// certificate), may its CA be pinned when nothing is: an Identity those checks refuse,
	// an Identity writer's decoy, pins nothing.
	if reason, msg, err := r.checkPinnedCA(ctx, id, true); err != nil || reason != "" {
		return r.refuseOrFail(id, notes, reason, msg, err)
	}
	if ok, msg, err := r.ensureSecret(ctx, id, kubeconfig); err != nil || !ok {
		if err == nil {
			r.refuse(id, notes, authv1beta1.ReasonKubeconfigSecretNotOwned, msg)
		}
		return ctrl.Result{}, err
	}
	setReady(id, notes, cert, caFP, user, now)
	// Come back when the certificate expires, to report it.
	return ctrl.Result{RequeueAfter: cert.NotAfter.Sub(now) + time.Second}, nil
}

// forgeKubeconfig is the kubeconfig of the Identity for user, with the key of this
// cluster that holds its certificate; reason and msg say why there is none (a decision),
// err that it could not be decided (a retry).
func (r *Reconciler) forgeKubeconfig(ctx context.Context, id *authv1beta1.Identity, user string, now time.Time) (kubeconfig []byte, reason, msg string, err error) {
	params := id.Spec.AuthParams
	key, reason, msg, err := r.holdingKey(ctx, params.SignedCRT)
	if err != nil || reason != "" {
		return nil, reason, msg, err
	}
	kubeconfig, err = authn.ForgeKubeconfig(authn.KubeconfigParams{
		ClusterName: string(id.Spec.ClusterID), User: user, Server: params.APIServer, CA: params.CA,
		ProxyURL: ptr.Deref(params.ProxyURL, ""), CertPEM: params.SignedCRT, Key: key, Namespace: ptr.Deref(id.Spec.Namespace, ""),
	}, now)
	if err != nil {
		if reason := authn.ReasonOf(err); reason != "" {
			return nil, string(reason), err.Error(), nil
		}
		return nil, "", "", err
	}
	return kubeconfig, "", "", nil
}

// holdingKey is the key of this cluster's key set that holds the certificate's public key:
// the one the kubeconfig carries. A certificate no key of the set holds is refused.
func (r *Reconciler) holdingKey(ctx context.Context, certPEM []byte) (crypto.Signer, string, string, error) {
	cert, err := authn.ParseCertificate(certPEM)
	if err != nil {
		return nil, string(authn.ReasonOf(err)), err.Error(), nil
	}
	ks, err := r.Keys.Keys(ctx)
	if err != nil {
		return nil, "", "", err
	}
	if key := ks.Holding(cert.PublicKey); key != nil {
		return key, "", "", nil
	}
	return nil, string(authn.ReasonCertificateKeyMismatch), "the signed certificate is for none of this cluster's keys (current, staged or previous)", nil
}

// refuseOrFail ends reconcile after a check that returned a reason or an error: an error
// is returned (a retry), a reason is recorded as a refusal (a decision).
func (r *Reconciler) refuseOrFail(id *authv1beta1.Identity, notes *status.Deferred, reason, msg string, err error) (ctrl.Result, error) {
	if err != nil {
		return ctrl.Result{}, err
	}
	r.refuse(id, notes, reason, msg)
	return ctrl.Result{}, nil
}

// kubeconfigUser is the user the provider knows this cluster as: its cluster ID for the
// control plane, the slice's user name for a ResourceSlice Identity.
func kubeconfigUser(id *authv1beta1.Identity, clusterID string) string {
	if id.Spec.Type == authv1beta1.ResourceSliceIdentityType {
		return authn.SliceUserName(id.Labels[wire.SliceNameLabel], clusterID)
	}
	return clusterID
}

// setReady is reconcile's last step, once the Secret holds the kubeconfig: the status
// names the Secret, the CA and the certificate (a new serial is a renewal), and Ready is
// true, announced by an Event when it changed.
func setReady(id *authv1beta1.Identity, notes *status.Deferred, cert *x509.Certificate, caFP, user string, now time.Time) {
	params := id.Spec.AuthParams
	id.Status.KubeconfigSecretRef = &corev1.LocalObjectReference{Name: wire.KubeconfigSecretName(id.Name)}
	id.Status.CAFingerprint = caFP
	if old := id.Status.Certificate; old != nil && old.SerialNumber != "" && old.SerialNumber != cert.SerialNumber.Text(16) {
		id.Status.LastRenewal = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	id.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: cert.SerialNumber.Text(16),
		NotBefore: ptr.To(metav1.NewTime(cert.NotBefore)), NotAfter: ptr.To(metav1.NewTime(cert.NotAfter))}
	msg := fmt.Sprintf("kubeconfig %s for %s as user %q, certificate %s valid until %s", id.Status.KubeconfigSecretRef.Name,
		params.APIServer, user, id.Status.Certificate.SerialNumber, cert.NotAfter.UTC().Format(time.RFC3339))
	if status.SetCondition(&id.Status.Conditions, authv1beta1.ConditionReady, true, authv1beta1.ReasonKubeconfigReady, msg, id.Generation) {
		notes.Eventf(id, nil, corev1.EventTypeNormal, authv1beta1.ReasonKubeconfigReady, "WriteKubeconfig", "%s", msg)
	}
}

// checkPlacement verifies that the Identity is named, labelled and placed for its provider.
func (r *Reconciler) checkPlacement(ctx context.Context, id *authv1beta1.Identity) (reason, msg string, err error) {
	p := string(id.Spec.ClusterID)
	if validateClusterIDErr := cluster.ValidateClusterID(p); validateClusterIDErr != nil {
		return authv1beta1.ReasonInvalidClusterID, "spec.clusterID: " + validateClusterIDErr.Error(), nil //nolint:nilerr // an invalid name is a decision (the reason), not a retry
	}
	switch id.Spec.Type {
	case authv1beta1.ControlPlaneIdentityType:
		if id.Name != wire.IdentityName(p) {
			return authv1beta1.ReasonIdentityNameMismatch, fmt.Sprintf("a control-plane Identity for cluster %q is named %q, not %q", p, wire.IdentityName(p), id.Name), nil
		}
	case authv1beta1.ResourceSliceIdentityType:
		slice := id.Labels[wire.SliceNameLabel]
		if slice == "" || id.Name != wire.SliceIdentityName(slice) {
			return authv1beta1.ReasonIdentityNameMismatch, fmt.Sprintf("a ResourceSlice Identity carries label %s naming its slice and is named %q after it, not %q", wire.SliceNameLabel, wire.SliceIdentityName(slice), id.Name), nil
		}
	default:
		return authv1beta1.ReasonIdentityTypeUnsupported, fmt.Sprintf("identities of type %q are not handled by liqo-auth; only %q and %q", id.Spec.Type, authv1beta1.ControlPlaneIdentityType, authv1beta1.ResourceSliceIdentityType), nil
	}
	if l := id.Labels[wire.RemoteClusterIDLabel]; l != p {
		return authv1beta1.ReasonIdentityLabelMismatch, fmt.Sprintf("label %s is %q but spec.clusterID is %q", wire.RemoteClusterIDLabel, l, p), nil
	}
	if ptr.Deref(id.Spec.Namespace, "") == "" {
		return authv1beta1.ReasonRemoteNamespaceMissing, "spec.namespace (the provider's tenant namespace) is empty", nil
	}
	ok, why, err := r.Placement.Verify(ctx, id.Namespace, p)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return authv1beta1.ReasonIdentityMisplaced, why + ": an Identity is used only in the tenant namespace this cluster's administrator made for its provider", nil
	}
	return "", "", nil
}

// checkPinnedCA checks the Identity's CA against the provider CA pinned in this cluster's
// tenant record (by liqoctl, from what the provider presented or from
// --expect-fingerprint). With no pin yet (an Identity applied by hand), pin says whether
// to pin this CA now, on first use: reconcile asks only once the Identity passed every
// other check, so that no Identity it refuses chooses the CA every later Identity and
// renewal of that provider must present.
func (r *Reconciler) checkPinnedCA(ctx context.Context, id *authv1beta1.Identity, pin bool) (reason, msg string, err error) {
	got, err := authn.CAFingerprint(id.Spec.AuthParams.CA)
	if err != nil {
		return string(authn.ReasonOf(err)), err.Error(), nil
	}
	provider := string(id.Spec.ClusterID)
	if rec, getTenantRecordErr := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider); getTenantRecordErr == nil && rec != nil && rec.CAFingerprint == got {
		return "", "", nil // the usual case, from the cache
	}
	err = cluster.UpdateCachedTenantRecord(ctx, r.Client, r.Placement.Live, r.Placement.LiqoNamespace, provider, false, func(rec *cluster.TenantRecord) error {
		switch rec.CAFingerprint {
		case got:
		case "":
			if pin {
				rec.CAFingerprint = got
			}
		default:
			reason = string(authn.ReasonCAFingerprintMismatch)
			msg = fmt.Sprintf("the Identity presents CA %s, but this cluster pinned CA %s for provider %q: %s, and the Identity is taken again",
				got, rec.CAFingerprint, provider, cluster.RepinCAAdvice(r.Placement.LiqoNamespace, provider, got))
		}
		return nil
	})
	return reason, msg, err
}

// checkPins verifies the Identity against what this cluster pinned for its provider: the
// CA (pinning none), the proxy, then this cluster's tenant namespace there.
func (r *Reconciler) checkPins(ctx context.Context, id *authv1beta1.Identity) (reason, msg string, err error) {
	if reason, msg, err = r.checkPinnedCA(ctx, id, false); err != nil || reason != "" {
		return reason, msg, err
	}
	if reason, msg, err = r.checkPinnedProxy(ctx, id); err != nil || reason != "" {
		return reason, msg, err
	}
	return r.checkPinnedNamespace(ctx, id)
}

// checkPinnedNamespace verifies that the Identity names, as this cluster's tenant
// namespace on its provider, the one a handshake pinned (cluster.TenantRecord.
// ProviderTenantNamespace): an Identity writer who moves it would have the slices' copies
// and the proofs of their revocation looked for where they are not (helper-39's F7).
// With none pinned (a peering older than the pin), any is taken. A cache that does not
// agree is checked against the live record, which liqoctl may have just written.
func (r *Reconciler) checkPinnedNamespace(ctx context.Context, id *authv1beta1.Identity) (reason, msg string, err error) {
	got := ptr.Deref(id.Spec.Namespace, "")
	provider := string(id.Spec.ClusterID)
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return "", "", err
	}
	if rec.CheckProviderNamespace(got) == nil {
		return "", "", nil // the usual case, from the cache
	}
	live := r.Placement.Live
	if live == nil {
		live = r.Client
	}
	if rec, err = cluster.GetTenantRecord(ctx, live, r.Placement.LiqoNamespace, provider); err != nil {
		return "", "", err
	}
	if rec.CheckProviderNamespace(got) != nil {
		// Advised: the handshake again, which applies the Identity with the pinned
		// namespace; never the pin's removal, after which any Identity would be taken
		// (helper-43's F1).
		msg = fmt.Sprintf("the Identity names %q as this cluster's tenant namespace on provider %q, but a handshake pinned %q (%v): whoever may write Identities may have moved it; liqoctl authenticate (or applying the Identity the provider's administrator generates) puts the pinned one back",
			got, provider, rec.ProviderTenantNamespace, cluster.ErrTenantNamespaceNotPinned)
		if rec.PinnedByManager {
			msg = fmt.Sprintf("the Identity names %q as this cluster's tenant namespace on provider %q, but this cluster's manager pinned %q (%v), its guess for a Peering's peering older than the pins: whoever may write Identities may have moved it; if the provider keeps this cluster elsewhere, liqoctl authenticate with both kubeconfigs replaces the guess with the namespace the provider keeps, as does liqoctl generate tenant --remote-tenant-namespace as the provider's administrator gives it (liqoctl create nonce prints it there; not the namespace this Identity names)",
				got, provider, rec.ProviderTenantNamespace, cluster.ErrTenantNamespaceNotPinned)
		}
		return string(authn.ReasonTenantNamespaceNotPinned), msg, nil
	}
	return "", "", nil
}

// checkPinnedProxy verifies that the Identity reaches its provider through the proxy this
// cluster pinned for it (cluster.TenantRecord.ProxyURL): whoever may write Identities, or
// the provider's Tenant the Identity was made from, could have put another there. Only a
// handshake pins (liqoctl authenticate, generate tenant, a Peering), never this
// controller: an Identity writer's Identity, refused or not, would otherwise choose the
// pin whenever none is there (after an unpin, an unauthenticate, on a peering older than
// the pin). With none pinned, only an Identity with no proxy is taken
// (cluster.TenantRecord.CheckIdentityProxy).
// A cache that does not agree is checked against the live record, which liqoctl may have
// just written.
func (r *Reconciler) checkPinnedProxy(ctx context.Context, id *authv1beta1.Identity) (reason, msg string, err error) {
	got := ptr.Deref(id.Spec.AuthParams.ProxyURL, "")
	provider := string(id.Spec.ClusterID)
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, provider)
	if err != nil {
		return "", "", err
	}
	if rec != nil && rec.ProxyURL != nil && *rec.ProxyURL == got {
		return "", "", nil // the usual case, from the cache
	}
	live := r.Placement.Live
	if live == nil {
		live = r.Client
	}
	if rec, err = cluster.GetTenantRecord(ctx, live, r.Placement.LiqoNamespace, provider); err != nil {
		return "", "", err
	}
	if pinErr := rec.CheckIdentityProxy(r.Placement.LiqoNamespace, provider, got); pinErr != nil {
		return string(authn.ReasonProxyNotPinned), "the Identity's proxy is " + pinErr.Error(), nil //nolint:nilerr // a proxy other than the pinned one is a refusal, not a retry
	}
	return "", "", nil
}

// ensureSecret creates or updates the kubeconfig Secret, owned by the Identity. A Secret
// of that name owned by something else is left alone.
func (r *Reconciler) ensureSecret(ctx context.Context, id *authv1beta1.Identity, kubeconfig []byte) (bool, string, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: id.Namespace, Name: wire.KubeconfigSecretName(id.Name)}
	err := r.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	} else if err != nil {
		return false, "", err
	} else if owner := metav1.GetControllerOf(s); !ownedOrOrphaned(owner, id) {
		return false, fmt.Sprintf("Secret %s exists and is not owned by this Identity: remove it to let the kubeconfig be written", key), nil
	}
	want := s.DeepCopy()
	want.Labels = mergeMaps(want.Labels, map[string]string{wire.RemoteClusterIDLabel: string(id.Spec.ClusterID),
		wire.IdentityTypeLabel: string(id.Spec.Type), wire.ManagedByLabel: wire.ManagedByValue})
	want.Annotations = mergeMaps(want.Annotations, map[string]string{wire.RemoteTenantNamespaceAnnotation: ptr.Deref(id.Spec.Namespace, "")})
	want.Data = map[string][]byte{wire.KubeconfigField: kubeconfig}
	want.Type = corev1.SecretTypeOpaque
	want.OwnerReferences = slices.DeleteFunc(want.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "Identity" && o.UID != id.UID
	})
	if setControllerReferenceErr := controllerutil.SetControllerReference(id, want, r.Client.Scheme()); setControllerReferenceErr != nil {
		return false, "", setControllerReferenceErr
	}
	switch {
	case s.ResourceVersion == "":
		// AlreadyExists: written by an earlier reconcile the cache has not seen yet; its
		// event brings this Identity back.
		if err = r.Client.Create(ctx, want); apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case !bytes.Equal(s.Data[wire.KubeconfigField], kubeconfig) || !equality.Semantic.DeepEqual(s.ObjectMeta, want.ObjectMeta):
		// A patch of what differs (the cache may hold the Secret without others'
		// annotations), with the resourceVersion read.
		err = r.Client.Patch(ctx, want, client.MergeFromWithOptions(s, client.MergeFromWithOptimisticLock{}))
	}
	return err == nil, "", err
}

// ownedOrOrphaned reports whether the kubeconfig Secret belongs to id, or to an earlier
// Identity of the same name: names are unique, so that one was deleted, and the garbage
// collector has not removed its Secret yet. Such a Secret is adopted; one controlled by
// anything else is not.
func ownedOrOrphaned(owner *metav1.OwnerReference, id *authv1beta1.Identity) bool {
	if owner == nil {
		return false
	}
	if owner.UID == id.UID {
		return true
	}
	return owner.Kind == "Identity" && owner.Name == id.Name && owner.APIVersion == authv1beta1.GroupVersion.String()
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func (r *Reconciler) refuse(id *authv1beta1.Identity, notes *status.Deferred, reason, msg string) {
	if status.SetCondition(&id.Status.Conditions, authv1beta1.ConditionReady, false, reason, msg, id.Generation) {
		notes.Eventf(id, nil, corev1.EventTypeWarning, reason, "WriteKubeconfig", "%s", msg)
		id.Status.LastRefusal = &authv1beta1.Refusal{Reason: reason, Time: metav1.Time{Time: r.Now().Truncate(time.Second)}}
	}
}
