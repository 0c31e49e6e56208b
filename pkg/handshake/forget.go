package handshake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// PeerHere is what cluster s holds of its peering with another cluster, as a consumer
// (an Identity on it, slices asked of it) and as a provider (its Tenant, slices given).
type PeerHere struct {
	PeerID string
	// TenantNamespace is s's tenant namespace for the peer.
	TenantNamespace string
	// Identity is s's control-plane Identity on the peer (nil: none).
	Identity *authv1beta1.Identity
	// Undesignated is set when no tenant namespace is designated for the peer here:
	// TenantNamespace is only the name one would have, and nothing was read from it.
	Undesignated bool
	// ConsumerSlices are the slices s asked of the peer.
	ConsumerSlices []string
	// Tenant is the peer's Tenant on s (nil: none).
	Tenant *authv1beta1.Tenant
	// ProviderSlices are the slices s gave the peer.
	ProviderSlices []string
}

// Consumer reports whether s is a consumer of the peer.
func (h *PeerHere) Consumer() bool { return h.Identity != nil || len(h.ConsumerSlices) > 0 }

// Provider reports whether s is a provider of the peer.
func (h *PeerHere) Provider() bool { return h.Tenant != nil || len(h.ProviderSlices) > 0 }

// InspectPeer reads what s holds of its peering with peerID, without reaching the peer.
func InspectPeer(ctx context.Context, s *Side, peerID string) (*PeerHere, error) {
	h := &PeerHere{PeerID: peerID}
	tn, err := s.TenantNamespace(ctx, peerID)
	switch {
	case errors.Is(err, cluster.ErrTenantNamespaceNotFound):
		// No namespace is designated for the peer: liqo-tenant-<id> may be anyone's (a
		// namespace creator's look-alike), so nothing is read there, nor deleted.
		h.TenantNamespace, h.Undesignated = wire.TenantNamespaceName(peerID), true
		return h, nil
	case err != nil:
		return nil, s.Explain(err, "finding the tenant namespace")
	}
	h.TenantNamespace = tn
	if err := readPeerObjects(ctx, s, h); err != nil {
		return nil, err
	}
	if err := readPeerSlices(ctx, s, h); err != nil {
		return nil, err
	}
	return h, nil
}

// readPeerObjects is InspectPeer's read of the peer's Identity and Tenant in the tenant
// namespace h names, into h: an absent one (or an absent API) is nil.
func readPeerObjects(ctx context.Context, s *Side, h *PeerHere) error {
	var id authv1beta1.Identity
	switch err := s.Client.Get(ctx, client.ObjectKey{Namespace: h.TenantNamespace, Name: wire.IdentityName(h.PeerID)}, &id); {
	case err == nil:
		h.Identity = &id
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return s.Explain(err, "reading the Identity")
	}
	var t authv1beta1.Tenant
	switch err := s.Client.Get(ctx, client.ObjectKey{Namespace: h.TenantNamespace, Name: h.PeerID}, &t); {
	case err == nil:
		h.Tenant = &t
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return s.Explain(err, "reading the Tenant")
	}
	return nil
}

// readPeerSlices is InspectPeer's sort of the ResourceSlices in the tenant namespace h
// names into those given to the peer and those asked of it.
func readPeerSlices(ctx context.Context, s *Side, h *PeerHere) error {
	var list authv1beta1.ResourceSliceList
	if err := s.Client.List(ctx, &list, client.InNamespace(h.TenantNamespace)); err != nil && !meta.IsNoMatchError(err) {
		return s.Explain(err, "listing the ResourceSlices")
	}
	// The namespace is the peer's: a slice there is given to the peer (a provider's copy
	// naming it as consumer), or else asked of it by this cluster, whatever its labels
	// say, which a slice writer may change to hide a slice whose certificate still works.
	// A copy claiming a third cluster is neither (the tenant may write one); this
	// cluster's own requests name it as consumer, as its controller writes them.
	for i := range list.Items {
		rs := &list.Items[i]
		switch consumer, providerCopy := access.SliceConsumer(rs); {
		case providerCopy && consumer == h.PeerID:
			h.ProviderSlices = append(h.ProviderSlices, rs.Name)
		case askedOfPeer(rs, s.ClusterID):
			h.ConsumerSlices = append(h.ConsumerSlices, rs.Name)
		}
	}
	return nil
}

// ForgetPeer undoes, on cluster s alone, its peering with a cluster that cannot be
// reached: as a consumer, its Identity, kubeconfig, signed nonce and (with deleteSlices)
// the slices it asked, which their provider cannot answer any more; as a provider, the
// peer's Tenant, bindings, nonce, requests and slices, with the proof that the peer's user
// lost its access here. It returns what stays on the peer, for its administrator. The
// consumer's slices are refused without deleteSlices; s's controllers must run when it is
// the peer's provider (its Tenant's and slices' finalizers).
func ForgetPeer(ctx context.Context, s *Side, h *PeerHere, deleteSlices, deleteNamespace bool, now time.Time) ([]string, error) {
	var left []string
	if len(h.ConsumerSlices) > 0 && !deleteSlices {
		return nil, fmt.Errorf("%sthis cluster holds ResourceSlices from provider %q: %s; pass --delete-resourceslices to remove them here (their identities keep working on the provider until their certificates expire, or until its administrator runs unauthenticate there)",
			s.prefix(), h.PeerID, strings.Join(h.ConsumerSlices, ", "))
	}
	if h.Consumer() {
		what, err := forgetAsConsumer(ctx, s, h)
		if err != nil {
			return nil, err
		}
		left = append(left, what)
	}
	if h.Provider() {
		what, err := forgetAsProvider(ctx, s, h, now)
		if err != nil {
			return nil, err
		}
		left = append(left, what)
	}
	if !h.Consumer() && !h.Provider() {
		s.Report.Info("No Identity, Tenant or ResourceSlice of cluster %q here", h.PeerID)
	}
	if !h.Consumer() {
		// The pins of a handshake that made no Identity here (generate tenant alone) go
		// too, as the advice of their refusals says (helper-43's F4).
		if err := cluster.ForgetProxy(ctx, s.Client, s.Namespace, h.PeerID); err != nil {
			return nil, s.Explain(err, "forgetting the pinned proxy and tenant namespace")
		}
	}
	if err := forgetTenantNamespace(ctx, s, h, deleteNamespace); err != nil {
		return nil, err
	}
	return left, nil
}

// forgetAsConsumer is ForgetPeer's consumer half: the slices s asked of the peer, then its
// Identity. It returns what stays on the peer of it.
func forgetAsConsumer(ctx context.Context, s *Side, h *PeerHere) (string, error) {
	for _, name := range h.ConsumerSlices {
		if err := forgetConsumerSlice(ctx, s, h.TenantNamespace, name); err != nil {
			return "", err
		}
		s.Report.Info("ResourceSlice %s removed here; its provider was not told", name)
	}
	if err := RemoveIdentity(ctx, s, h.PeerID); err != nil {
		return "", err
	}
	what := fmt.Sprintf("as provider: the Tenant %s, its bindings", s.ClusterID)
	if len(h.ConsumerSlices) > 0 {
		what += ", ResourceSlices " + strings.Join(h.ConsumerSlices, ", ")
	}
	if h.Identity != nil && h.Identity.Status.Certificate != nil && h.Identity.Status.Certificate.NotAfter != nil {
		what += fmt.Sprintf("; the certificate it issued to %s stays valid until %s", s.ClusterID, h.Identity.Status.Certificate.NotAfter.UTC().Format(time.RFC3339))
	}
	return what, nil
}

// forgetAsProvider is ForgetPeer's provider half: the slices s gave the peer (all deleted,
// then all waited for), then its Tenant, and the proof that the peer's user lost its
// access. It returns what stays on the peer of it.
func forgetAsProvider(ctx context.Context, s *Side, h *PeerHere, now time.Time) (string, error) {
	for _, name := range h.ProviderSlices {
		if err := deleteIgnoringAbsence(ctx, s.Client, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: h.TenantNamespace, Name: name}}); err != nil {
			return "", s.Explain(err, "deleting ResourceSlice "+name)
		}
	}
	for _, name := range h.ProviderSlices {
		if err := waitFor(ctx, s.Client, client.ObjectKey{Namespace: h.TenantNamespace, Name: name}, &authv1beta1.ResourceSliceList{}, "ResourceSlice "+name+" to be deleted",
			func(rs *authv1beta1.ResourceSlice) (bool, string, error) {
				return rs == nil, "its finalizer is handled by " + s.Controllers().String(), nil
			}); err != nil {
			return "", s.Explain(err, "deleting the ResourceSlices given to the peer")
		}
	}
	if len(h.ProviderSlices) > 0 {
		s.Report.Info("ResourceSlices %s deleted", strings.Join(h.ProviderSlices, ", "))
	}
	if err := RemoveTenant(ctx, s, h.PeerID); err != nil {
		return "", err
	}
	if err := VerifyRevoked(ctx, s, h.PeerID, h.TenantNamespace, nil, now); err != nil {
		return "", err
	}
	return fmt.Sprintf("as consumer: the Identity %s, its kubeconfig and the signed nonce (they authorize nothing here any more)", wire.IdentityName(s.ClusterID)), nil
}

// forgetTenantNamespace is ForgetPeer's last step, with deleteNamespace: the tenant
// namespace and its place in the record, unless it is not the designated one (then it is
// left alone, and said so).
func forgetTenantNamespace(ctx context.Context, s *Side, h *PeerHere, deleteNamespace bool) error {
	if deleteNamespace && h.Undesignated {
		s.Report.Warn("Namespace %s is not the designated tenant namespace of %q: it is left alone", h.TenantNamespace, h.PeerID)
	} else if deleteNamespace {
		if err := deleteIgnoringAbsence(ctx, s.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.TenantNamespace}}); err != nil {
			return s.Explain(err, "deleting the tenant namespace")
		}
		if err := cluster.ForgetTenantNamespace(ctx, s.Client, s.Namespace, h.PeerID); err != nil {
			return s.Explain(err, "updating the tenant record")
		}
		s.Report.Info("Tenant namespace %s deleted", h.TenantNamespace)
	}
	return nil
}

// forgetConsumerSlice removes a slice this consumer asked of a provider it cannot reach:
// the slice (without waiting for the provider, which its finalizer would), its Identity
// and kubeconfig. The slice is deleted before its finalizer is released: once it is being
// deleted, no controller can put the finalizer back (a running manager would, between a
// release and a deletion, and then wait for the provider).
func forgetConsumerSlice(ctx context.Context, s *Side, ns, name string) error {
	key := client.ObjectKey{Namespace: ns, Name: name}
	if err := deleteIgnoringAbsence(ctx, s.Client, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		return s.Explain(err, "deleting ResourceSlice "+name)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rs := &authv1beta1.ResourceSlice{}
		if err := s.Client.Get(ctx, key, rs); err != nil || !slices.Contains(rs.Finalizers, wire.ConsumerSliceFinalizer) {
			return client.IgnoreNotFound(err)
		}
		patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(rs, wire.ConsumerSliceFinalizer)
		return client.IgnoreNotFound(s.Client.Patch(ctx, rs, patch))
	})
	if err != nil {
		return s.Explain(err, "releasing ResourceSlice "+name)
	}
	idName := wire.SliceIdentityName(name)
	for _, obj := range []client.Object{
		&authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: idName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.KubeconfigSecretName(idName)}},
	} {
		if err := deleteIgnoringAbsence(ctx, s.Client, obj); err != nil {
			return s.Explain(err, "deleting ResourceSlice "+name)
		}
	}
	return nil
}
