package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// DetectLiqo says whether Liqo's own controllers run in the cluster: its
// liqo-controller-manager Deployment exists in the Liqo namespace and is not scaled to
// zero. It returns what it found, in words ("" when Liqo's controllers do not run there).
// Credentials that may not read Deployments (a peering user) see nothing: the caller
// then needs an explicit choice.
func DetectLiqo(ctx context.Context, c client.Reader, liqoNS string) (string, error) {
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: liqoNS, Name: wire.LiqoControllerManagerName}, &d)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case d.Spec.Replicas != nil && *d.Spec.Replicas == 0:
		return "", nil
	}
	return fmt.Sprintf("Deployment %s/%s", liqoNS, wire.LiqoControllerManagerName), nil
}

// FindLiqoTenantNamespace is the tenant namespace of remoteID on a cluster that runs
// Liqo's controllers, which trust the namespace's labels (this project's records are not
// theirs): liqo-tenant-<remoteID>, carrying the labels of the protocol. Anyone who may
// create and label a namespace can make a look-alike, and the Identity and kubeconfig of
// the peer go wherever the tenant namespace is: so only the namespace of that name is
// taken, and when any other namespace claims the peer too, the answer is an error that
// names them (Liqo's own controllers could pick either).
func FindLiqoTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
	want := wire.TenantNamespaceName(remoteID)
	var list corev1.NamespaceList
	err := c.List(ctx, &list, client.MatchingLabels(TenantNamespaceLabels(remoteID)))
	switch {
	case apierrors.IsForbidden(err):
		// Credentials that may not list namespaces (a peering user) read it by name.
	case err != nil:
		return "", err
	default:
		var others []string
		for _, ns := range list.Items {
			if ns.Name != want {
				others = append(others, ns.Name)
			}
		}
		if len(others) > 0 {
			return "", fmt.Errorf("%w: namespaces %s carry the labels of the tenant namespace of cluster %q besides %s, and Liqo's controllers trust those labels: remove them from the namespaces you did not make (or delete those namespaces), then retry",
				ErrAmbiguousTenantNamespace, strings.Join(others, ", "), remoteID, want)
		}
	}
	return getDefaultTenantNamespace(ctx, c, remoteID)
}

// ErrAmbiguousTenantNamespace means several namespaces claim to be the tenant namespace of
// a remote cluster on a cluster whose controllers (Liqo's) trust namespace labels.
var ErrAmbiguousTenantNamespace = errors.New("more than one namespace claims to be the tenant namespace")

// EnsureLiqoTenantNamespace makes (or finds) the tenant namespace of remoteID on a
// cluster that runs Liqo's controllers, as Liqo's liqoctl does: the labels of the
// protocol and nothing of this project's (no record, no manager binding).
func EnsureLiqoTenantNamespace(ctx context.Context, c client.Client, remoteID string) (string, error) {
	name, err := FindLiqoTenantNamespace(ctx, c, remoteID)
	if err == nil || errors.Is(err, ErrAmbiguousTenantNamespace) {
		return name, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(remoteID), Labels: TenantNamespaceLabels(remoteID)}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %q: %w", ns.Name, err)
	}
	return FindLiqoTenantNamespace(ctx, c, remoteID)
}
