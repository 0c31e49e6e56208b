package cluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LiqoControllerManagerName is the Deployment of Liqo's controllers, in the Liqo
// namespace, as Liqo's chart names it.
const LiqoControllerManagerName = "liqo-controller-manager"

// DetectLiqo says whether Liqo's own controllers run in the cluster: its
// liqo-controller-manager Deployment exists in the Liqo namespace and is not scaled to
// zero. It returns what it found, in words ("" when Liqo's controllers do not run there).
// Credentials that may not read Deployments (a peering user) see nothing: the caller
// then needs an explicit choice.
func DetectLiqo(ctx context.Context, c client.Reader, liqoNS string) (string, error) {
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: liqoNS, Name: LiqoControllerManagerName}, &d)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case d.Spec.Replicas != nil && *d.Spec.Replicas == 0:
		return "", nil
	}
	return fmt.Sprintf("Deployment %s/%s", liqoNS, LiqoControllerManagerName), nil
}

// FindLiqoTenantNamespace is the tenant namespace of remoteID on a cluster that runs
// Liqo's controllers, which trust the namespace's labels (this project's records are not
// theirs): the namespace carrying the labels of the protocol, or the one of the default
// name.
func FindLiqoTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
	var list corev1.NamespaceList
	err := c.List(ctx, &list, client.MatchingLabels(TenantNamespaceLabels(remoteID)))
	if err == nil && len(list.Items) > 0 {
		return list.Items[0].Name, nil
	}
	if err != nil && !apierrors.IsForbidden(err) {
		return "", err
	}
	return getDefaultTenantNamespace(ctx, c, remoteID)
}

// EnsureLiqoTenantNamespace makes (or finds) the tenant namespace of remoteID on a
// cluster that runs Liqo's controllers, as Liqo's liqoctl does: the labels of the
// protocol and nothing of this project's (no record, no manager binding).
func EnsureLiqoTenantNamespace(ctx context.Context, c client.Client, remoteID string) (string, error) {
	name, err := FindLiqoTenantNamespace(ctx, c, remoteID)
	if err == nil {
		return name, nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TenantNamespaceName(remoteID), Labels: TenantNamespaceLabels(remoteID)}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %q: %w", ns.Name, err)
	}
	return FindLiqoTenantNamespace(ctx, c, remoteID)
}
