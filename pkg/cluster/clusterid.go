package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// MaxClusterIDLength keeps liqo-tenant-<id> within the 63 characters of a namespace name.
const MaxClusterIDLength = 63 - len(wire.TenantNamespacePrefix)

// ValidateClusterID checks that id is a DNS-1123 label of at most 51 characters.
func ValidateClusterID(id string) error {
	if id == "" {
		return fmt.Errorf("the cluster ID is empty")
	}
	if len(id) > MaxClusterIDLength {
		return fmt.Errorf("the cluster ID %q has %d characters; at most %d are allowed so that liqo-tenant-<id> is a valid namespace name", id, len(id), MaxClusterIDLength)
	}
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return fmt.Errorf("the cluster ID %q is not valid: %s", id, strings.Join(errs, "; "))
	}
	return nil
}

// GetClusterID reads the cluster ID from the ConfigMap labelled as the cluster-ID
// ConfigMap in namespace ns. Exactly one must exist. Credentials that may not list
// ConfigMaps there read it by name (GetClusterIDByName).
func GetClusterID(ctx context.Context, c client.Reader, ns string) (string, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wire.ClusterIDLabelKey: wire.ClusterIDLabelValue}); err != nil {
		if !apierrors.IsForbidden(err) {
			return "", fmt.Errorf("reading the cluster ID in namespace %q: %w", ns, err)
		}
		return GetClusterIDByName(ctx, c, ns)
	}
	switch len(list.Items) {
	case 0:
		return "", fmt.Errorf("%w: no ConfigMap labelled %s=%s in namespace %q", ErrNotInstalled, wire.ClusterIDLabelKey, wire.ClusterIDLabelValue, ns)
	case 1:
	default:
		return "", fmt.Errorf("%d ConfigMaps in namespace %q are labelled %s=%s; exactly one must be", len(list.Items), ns, wire.ClusterIDLabelKey, wire.ClusterIDLabelValue)
	}
	return clusterIDIn(ns, &list.Items[0])
}

// GetClusterIDByName reads the cluster ID from the cluster-ID ConfigMap of namespace ns,
// by its name: what credentials that may read it by name only (a peering user) can read.
// It must carry the cluster-ID label, as GetClusterID's does: a ConfigMap of that name
// without it is not the cluster's ID (anyone who may create ConfigMaps in ns could have
// made it), and EnsureClusterID would refuse it.
func GetClusterIDByName(ctx context.Context, c client.Reader, ns string) (string, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ClusterIDConfigMapName}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: no ConfigMap %s/%s", ErrNotInstalled, ns, wire.ClusterIDConfigMapName)
		}
		return "", fmt.Errorf("reading the cluster ID in namespace %q: %w", ns, err)
	}
	if cm.Labels[wire.ClusterIDLabelKey] != wire.ClusterIDLabelValue {
		return "", fmt.Errorf("ConfigMap %s/%s is not labelled %s=%s, so it is not this cluster's ID: its administrator should label it, or remove it and run liqoctl install", ns, wire.ClusterIDConfigMapName, wire.ClusterIDLabelKey, wire.ClusterIDLabelValue)
	}
	return clusterIDIn(ns, &cm)
}

// clusterIDIn is the cluster ID cm, the cluster-ID ConfigMap of namespace ns, holds.
func clusterIDIn(ns string, cm *corev1.ConfigMap) (string, error) {
	id := cm.Data[wire.ClusterIDKey]
	if id == "" {
		return "", fmt.Errorf("%w: ConfigMap %s/%s holds no %s yet (liqo-auth-manager fills it at its first start)", ErrNotInstalled, ns, cm.Name, wire.ClusterIDKey)
	}
	if err := ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("ConfigMap %s/%s: %w", ns, cm.Name, err)
	}
	return id, nil
}

// EnsureClusterID returns the installed cluster ID, creating it when missing: want if
// given, else a random UUIDv4. An installed ID never changes: asking for another one is
// an error.
func EnsureClusterID(ctx context.Context, c client.Client, ns, want string) (id string, created bool, err error) {
	asked := want
	if want != "" {
		if validateClusterIDErr := ValidateClusterID(want); validateClusterIDErr != nil {
			return "", false, validateClusterIDErr
		}
	}
	id, err = GetClusterID(ctx, c, ns)
	switch {
	case err == nil:
		if want != "" && want != id {
			return "", false, fmt.Errorf("this cluster is already installed with cluster ID %q; a cluster ID never changes (asked for %q)", id, want)
		}
		return id, false, nil
	case !isNotInstalled(err):
		return "", false, err
	}
	if want == "" {
		want = uuid.NewString()
	}
	filled, err := fillClusterID(ctx, c, ns, want)
	if apierrors.IsConflict(err) {
		// Another filler won the race (the second replica of a manifest, starting at the
		// same time): its cluster ID is the cluster's.
		return EnsureClusterID(ctx, c, ns, asked)
	}
	if filled || err != nil {
		return want, filled, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: wire.ClusterIDConfigMapName, Namespace: ns,
			Labels: map[string]string{wire.ClusterIDLabelKey: wire.ClusterIDLabelValue, wire.ManagedByLabel: wire.ManagedByValue}},
		Data: map[string]string{wire.ClusterIDKey: want},
	}
	if err := c.Create(ctx, cm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", false, fmt.Errorf("ConfigMap %s/%s exists without the label %s=%s: label it or remove it", ns, wire.ClusterIDConfigMapName, wire.ClusterIDLabelKey, wire.ClusterIDLabelValue)
		}
		return "", false, fmt.Errorf("creating the cluster ID: %w", err)
	}
	return want, true, nil
}

func isNotInstalled(err error) bool { return errors.Is(err, ErrNotInstalled) }

// fillClusterID writes id into the labelled cluster-ID ConfigMap of namespace ns if it
// exists without one, as a manifest applied by GitOps leaves it (a release manifest holds
// no cluster ID: every cluster needs its own). It reports whether it did.
func fillClusterID(ctx context.Context, c client.Client, ns, id string) (bool, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wire.ClusterIDLabelKey: wire.ClusterIDLabelValue}); err != nil {
		return false, fmt.Errorf("reading the cluster ID in namespace %q: %w", ns, err)
	}
	if len(list.Items) != 1 || list.Items[0].Data[wire.ClusterIDKey] != "" {
		return false, nil
	}
	cm := &list.Items[0]
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[wire.ClusterIDKey] = id
	if err := c.Update(ctx, cm); err != nil {
		return false, fmt.Errorf("writing the cluster ID: %w", err)
	}
	return true, nil
}

// ForgeClusterIDConfigMap is the cluster-ID ConfigMap of namespace ns, holding id (none
// when id is empty: liqo-auth-manager writes a random one at its first start).
func ForgeClusterIDConfigMap(ns, id string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: wire.ClusterIDConfigMapName, Namespace: ns,
			Labels: map[string]string{wire.ClusterIDLabelKey: wire.ClusterIDLabelValue, wire.ManagedByLabel: wire.ManagedByValue}},
	}
	if id != "" {
		cm.Data = map[string]string{wire.ClusterIDKey: id}
	}
	return cm
}
