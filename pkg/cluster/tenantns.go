package cluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TenantNamespaceLabels are the labels of the tenant namespace of a remote cluster.
func TenantNamespaceLabels(remoteID string) map[string]string {
	return map[string]string{RemoteClusterIDLabel: remoteID, TenantNamespaceLabel: "true"}
}

// IsTenantNamespaceOf reports whether ns is the tenant namespace of remoteID.
func IsTenantNamespaceOf(ns *corev1.Namespace, remoteID string) bool {
	return remoteID != "" && ns.Labels[TenantNamespaceLabel] == "true" && ns.Labels[RemoteClusterIDLabel] == remoteID
}

// GetTenantNamespace returns the name of the tenant namespace of remoteID, found by its
// labels. When listing namespaces is forbidden, it falls back to a GET of the default name.
func GetTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
	var list corev1.NamespaceList
	err := c.List(ctx, &list, client.MatchingLabels(TenantNamespaceLabels(remoteID)))
	switch {
	case err == nil:
		switch len(list.Items) {
		case 0:
			return "", fmt.Errorf("%w for cluster %q", ErrTenantNamespaceNotFound, remoteID)
		case 1:
			return list.Items[0].Name, nil
		default:
			return "", fmt.Errorf("%d namespaces are labelled as tenant namespace of cluster %q; remove all but one", len(list.Items), remoteID)
		}
	case apierrors.IsForbidden(err):
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: TenantNamespaceName(remoteID)}, &ns); err != nil {
			if apierrors.IsNotFound(err) {
				return "", fmt.Errorf("%w for cluster %q", ErrTenantNamespaceNotFound, remoteID)
			}
			return "", fmt.Errorf("reading namespace %q: %w", TenantNamespaceName(remoteID), err)
		}
		if !IsTenantNamespaceOf(&ns, remoteID) {
			return "", fmt.Errorf("namespace %q is not labelled as tenant namespace of cluster %q", ns.Name, remoteID)
		}
		return ns.Name, nil
	default:
		return "", fmt.Errorf("looking up the tenant namespace of cluster %q: %w", remoteID, err)
	}
}

// EnsureTenantNamespace returns the tenant namespace of remoteID, creating
// liqo-tenant-<remoteID> when none exists. A namespace of that name without the tenant
// labels is labelled; one labelled for another cluster is an error.
func EnsureTenantNamespace(ctx context.Context, c client.Client, remoteID string) (string, error) {
	if err := ValidateClusterID(remoteID); err != nil {
		return "", err
	}
	name, err := GetTenantNamespace(ctx, c, remoteID)
	if err == nil {
		return name, nil
	}
	if !isTenantNamespaceNotFound(err) {
		return "", err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TenantNamespaceName(remoteID), Labels: TenantNamespaceLabels(remoteID)}}
	ns.Labels[ManagedByLabel] = ManagedByValue
	err = c.Create(ctx, ns)
	if err == nil {
		return ns.Name, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating tenant namespace %q: %w", ns.Name, err)
	}
	var existing corev1.Namespace
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), &existing); err != nil {
		return "", fmt.Errorf("reading namespace %q: %w", ns.Name, err)
	}
	if existing.DeletionTimestamp != nil {
		return "", fmt.Errorf("namespace %q is being deleted; wait for it to go and retry", ns.Name)
	}
	if other := existing.Labels[RemoteClusterIDLabel]; other != "" && other != remoteID {
		return "", fmt.Errorf("namespace %q is the tenant namespace of cluster %q, not %q", ns.Name, other, remoteID)
	}
	patch := client.MergeFrom(existing.DeepCopy())
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for k, v := range TenantNamespaceLabels(remoteID) {
		existing.Labels[k] = v
	}
	if err := c.Patch(ctx, &existing, patch); err != nil {
		return "", fmt.Errorf("labelling namespace %q as tenant namespace: %w", ns.Name, err)
	}
	return existing.Name, nil
}

func isTenantNamespaceNotFound(err error) bool { return errors.Is(err, ErrTenantNamespaceNotFound) }
