package cluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

// GetTenantNamespace returns the name of the tenant namespace of remoteID: the one this
// cluster's record names, when the record can be read and the namespace is still the
// recorded one; otherwise the one found by its labels (falling back to a GET of the
// default name when listing namespaces is forbidden). Controllers do not use it: they
// trust only the record (VerifyTenantNamespace).
func GetTenantNamespace(ctx context.Context, c client.Reader, liqoNS, remoteID string) (string, error) {
	if rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID); err == nil && rec != nil && rec.Namespace != "" {
		if ok, _, err := VerifyTenantNamespace(ctx, c, liqoNS, rec.Namespace, remoteID); err == nil && ok {
			return rec.Namespace, nil
		}
	}
	return findTenantNamespace(ctx, c, remoteID)
}

// findTenantNamespace looks the tenant namespace of remoteID up by its labels.
func findTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
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
			return "", fmt.Errorf("%d namespaces are labelled as tenant namespace of cluster %q and this cluster recorded none of them; remove all but one", len(list.Items), remoteID)
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

// TenantNamespace is a tenant namespace EnsureTenantNamespace made or kept.
type TenantNamespace struct {
	// Name of the namespace.
	Name string
	// Adopted is set when the namespace existed before this cluster recorded it as a
	// tenant namespace (made by an older liqo-auth, by Liqo, or by anyone who may create
	// namespaces): the caller tells the administrator, whose act this adoption is.
	Adopted bool
}

// EnsureTenantNamespace makes the tenant namespace of remoteID: it creates
// liqo-tenant-<remoteID> when none exists (a namespace of that name without the tenant
// labels is labelled; one labelled for another cluster is an error), records it, with its
// UID, in the Liqo namespace liqoNS, and binds liqo-auth-manager's per-tenant role in it.
// This is an administrator's act: only it makes a namespace a tenant namespace.
func EnsureTenantNamespace(ctx context.Context, c client.Client, liqoNS, remoteID string) (*TenantNamespace, error) {
	if err := ValidateClusterID(remoteID); err != nil {
		return nil, err
	}
	rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID)
	if err != nil {
		return nil, err
	}
	var ns *corev1.Namespace
	if rec != nil && rec.Namespace != "" {
		if ok, _, err := VerifyTenantNamespace(ctx, c, liqoNS, rec.Namespace, remoteID); err != nil {
			return nil, err
		} else if ok {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rec.Namespace, UID: rec.NamespaceUID}}
		}
	}
	created := false
	if ns == nil {
		if ns, created, err = ensureNamespace(ctx, c, remoteID); err != nil {
			return nil, err
		}
		if err := UpdateTenantRecord(ctx, c, c, liqoNS, remoteID, true, func(r *TenantRecord) error {
			r.Namespace, r.NamespaceUID = ns.Name, ns.UID
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := ensureManagerBinding(ctx, c, liqoNS, ns.Name); err != nil {
		return nil, err
	}
	return &TenantNamespace{Name: ns.Name, Adopted: ns != nil && !created && (rec == nil || rec.NamespaceUID != ns.UID)}, nil
}

// ensureNamespace finds the labelled tenant namespace of remoteID, or creates (or labels)
// liqo-tenant-<remoteID>, and returns it with its UID.
func ensureNamespace(ctx context.Context, c client.Client, remoteID string) (*corev1.Namespace, bool, error) {
	if name, err := findTenantNamespace(ctx, c, remoteID); err == nil {
		var existing corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &existing); err != nil {
			return nil, false, fmt.Errorf("reading namespace %q: %w", name, err)
		}
		return &existing, false, nil
	} else if !isTenantNamespaceNotFound(err) {
		return nil, false, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TenantNamespaceName(remoteID), Labels: TenantNamespaceLabels(remoteID)}}
	ns.Labels[ManagedByLabel] = ManagedByValue
	err := c.Create(ctx, ns)
	if err == nil {
		return ns, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("creating tenant namespace %q: %w", ns.Name, err)
	}
	var existing corev1.Namespace
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), &existing); err != nil {
		return nil, false, fmt.Errorf("reading namespace %q: %w", ns.Name, err)
	}
	if existing.DeletionTimestamp != nil {
		return nil, false, fmt.Errorf("namespace %q is being deleted; wait for it to go and retry", ns.Name)
	}
	if other := existing.Labels[RemoteClusterIDLabel]; other != "" && other != remoteID {
		return nil, false, fmt.Errorf("namespace %q is the tenant namespace of cluster %q, not %q", ns.Name, other, remoteID)
	}
	patch := client.MergeFrom(existing.DeepCopy())
	existing.Labels = mergeLabels(existing.Labels, TenantNamespaceLabels(remoteID))
	if err := c.Patch(ctx, &existing, patch); err != nil {
		return nil, false, fmt.Errorf("labelling namespace %q as tenant namespace: %w", ns.Name, err)
	}
	return &existing, false, nil
}

// ensureManagerBinding binds, in tenant namespace ns, liqo-auth-manager's ServiceAccount
// to the per-tenant ClusterRole: the manager writes Secrets, Roles and RoleBindings only
// in namespaces an administrator made tenant namespaces (and in the Liqo namespace).
func ensureManagerBinding(ctx context.Context, c client.Client, liqoNS, ns string) error {
	want := ForgeManagerTenantBinding(liqoNS, ns)
	var current rbacv1.RoleBinding
	err := c.Get(ctx, client.ObjectKeyFromObject(want), &current)
	switch {
	case err == nil && current.RoleRef == want.RoleRef && equality.Semantic.DeepEqual(current.Subjects, want.Subjects):
		return nil
	case err == nil:
		// roleRef is immutable: replace the binding.
		if err := c.Delete(ctx, &current); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing RoleBinding %s/%s: %w", ns, want.Name, err)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading RoleBinding %s/%s: %w", ns, want.Name, err)
	}
	if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding liqo-auth-manager in tenant namespace %q: %w", ns, err)
	}
	return nil
}

// ForgetTenantNamespace clears the namespace from the record of remoteID once the
// namespace is deleted, keeping what the record says of certificates and CA pins.
func ForgetTenantNamespace(ctx context.Context, c client.Client, liqoNS, remoteID string) error {
	rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID)
	if err != nil || rec == nil {
		return err
	}
	return UpdateTenantRecord(ctx, c, c, liqoNS, remoteID, false, func(r *TenantRecord) error {
		r.Namespace, r.NamespaceUID = "", ""
		return nil
	})
}

func isTenantNamespaceNotFound(err error) bool { return errors.Is(err, ErrTenantNamespaceNotFound) }
