package cluster

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TenantNamespaceLabels are the labels of the tenant namespace of a remote cluster.
func TenantNamespaceLabels(remoteID string) map[string]string {
	return map[string]string{wire.RemoteClusterIDLabel: remoteID, wire.TenantNamespaceLabel: "true"}
}

// IsTenantNamespaceOf reports whether ns is the tenant namespace of remoteID.
func IsTenantNamespaceOf(ns *corev1.Namespace, remoteID string) bool {
	return remoteID != "" && ns.Labels[wire.TenantNamespaceLabel] == "true" && ns.Labels[wire.RemoteClusterIDLabel] == remoteID
}

// GetTenantNamespace returns the name of the tenant namespace of remoteID: the one this
// cluster's record names, if it is still the recorded namespace. Credentials that may not
// read the record (a peering user) get liqo-tenant-<remoteID>, if it carries the labels.
// Labels alone never make a namespace a tenant namespace: anyone who may create
// namespaces can set them.
func GetTenantNamespace(ctx context.Context, c client.Reader, liqoNS, remoteID string) (string, error) {
	rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID)
	switch {
	case apierrors.IsForbidden(err):
		return getDefaultTenantNamespace(ctx, c, remoteID)
	case err != nil:
		return "", err
	case rec == nil || rec.Namespace == "":
		return "", fmt.Errorf("%w for cluster %q", ErrTenantNamespaceNotFound, remoteID)
	}
	ok, why, err := checkRecorded(ctx, c, rec, rec.Namespace, remoteID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%w for cluster %q: %s", ErrTenantNamespaceNotFound, remoteID, why)
	}
	return rec.Namespace, nil
}

func getDefaultTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: wire.TenantNamespaceName(remoteID)}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w for cluster %q", ErrTenantNamespaceNotFound, remoteID)
		}
		return "", fmt.Errorf("reading namespace %q: %w", wire.TenantNamespaceName(remoteID), err)
	}
	if !IsTenantNamespaceOf(&ns, remoteID) {
		return "", fmt.Errorf("%w: namespace %q is not labelled as tenant namespace of cluster %q", ErrTenantNamespaceNotFound, ns.Name, remoteID)
	}
	return ns.Name, nil
}

// TenantNamespace is a tenant namespace EnsureTenantNamespace made or kept.
type TenantNamespace struct {
	// Name of the namespace.
	Name string
	// Adopted is set when an existing namespace was made a tenant namespace.
	Adopted bool
	// Created is set when the namespace was created now: nothing is in it yet.
	Created bool
	// Record is the tenant record of remoteID as it was read before the namespace was
	// ensured (nil: there was none); what EnsureTenantNamespace wrote (the namespace and
	// its UID) is not in it.
	Record *TenantRecord
	// ReadIn says that the readIn given to EnsureTenantNamespaceReading ran in Name, beside
	// the checks of the recorded namespace, which it passed.
	ReadIn bool
	// DesignatedBy is, when the namespace existed without a record and was recorded as
	// made the tenant namespace by its creator (DesignatedByCreator), that creator.
	DesignatedBy string
}

// EnsureTenantNamespace makes the tenant namespace of remoteID: it creates
// liqo-tenant-<remoteID>, records it with its UID in the Liqo namespace liqoNS, and binds
// liqo-auth-manager's per-tenant role in it. This is an administrator's act: only it makes
// a namespace a tenant namespace. A namespace that exists without a record (made by an
// older liqo-auth, by Liqo, or by anyone who may create namespaces) is adopted only with
// adopt set; otherwise ErrUnrecordedNamespace says what to do.
func EnsureTenantNamespace(ctx context.Context, c client.Client, liqoNS, remoteID string, adopt bool) (*TenantNamespace, error) {
	return EnsureTenantNamespaceReading(ctx, c, liqoNS, remoteID, adopt, nil)
}

// EnsureTenantNamespaceReading is EnsureTenantNamespace that also runs readIn (when not
// nil) in the namespace the tenant record names, beside the reads that check it: what the
// caller reads in an existing tenant namespace costs no round trip of its own. What readIn
// read counts only when the result says ReadIn (the namespace checked out, and is the one
// returned); otherwise the caller reads again, if anything is there to read (not in a
// namespace created now).
func EnsureTenantNamespaceReading(ctx context.Context, c client.Client, liqoNS, remoteID string, adopt bool, readIn func(ctx context.Context, ns string)) (*TenantNamespace, error) {
	if err := ValidateClusterID(remoteID); err != nil {
		return nil, err
	}
	rec, err := GetTenantRecord(ctx, c, liqoNS, remoteID)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Namespace != "" {
		// The usual case, everything in place: the namespace and the manager's binding
		// are read together; the binding is written only in a namespace that checks out.
		var ok bool
		var binding *rbacv1.RoleBinding
		var eg errgroup.Group
		eg.Go(func() (err error) { ok, _, err = checkRecorded(ctx, c, rec, rec.Namespace, remoteID); return err })
		eg.Go(func() (err error) { binding, err = getBinding(ctx, c, liqoNS, rec.Namespace); return err })
		if readIn != nil {
			eg.Go(func() error { readIn(ctx, rec.Namespace); return nil })
		}
		if waitErr := eg.Wait(); waitErr != nil {
			return nil, waitErr
		}
		if ok {
			return &TenantNamespace{Name: rec.Namespace, Record: rec, ReadIn: readIn != nil}, ensureManagerBinding(ctx, c, liqoNS, rec.Namespace, binding)
		}
	}
	ns, how, err := ensureNamespace(ctx, c, liqoNS, remoteID, adopt)
	if err != nil {
		return nil, err
	}
	var eg errgroup.Group
	eg.Go(func() error {
		name := func(r *TenantRecord) error {
			r.Namespace, r.NamespaceUID = ns.Name, ns.UID
			return nil
		}
		if rec == nil {
			// Just read as missing: created without reading it again.
			return createTenantRecord(ctx, c, liqoNS, remoteID, name)
		}
		return UpdateTenantRecord(ctx, c, c, liqoNS, remoteID, true, name)
	})
	eg.Go(func() error {
		// Created first: in a namespace made a moment ago there is none yet. One that
		// exists all the same is read and, unless it is exactly the manager's, replaced.
		err := c.Create(ctx, access.ForgeManagerTenantBinding(liqoNS, ns.Name))
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("binding liqo-auth-manager in tenant namespace %q: %w", ns.Name, err)
			}
			return nil
		}
		binding, err := getBinding(ctx, c, liqoNS, ns.Name)
		if err != nil {
			return err
		}
		return ensureManagerBinding(ctx, c, liqoNS, ns.Name, binding)
	})
	return &TenantNamespace{Name: ns.Name, Adopted: how == adopted, Created: how == created, DesignatedBy: ns.creator, Record: rec}, eg.Wait()
}

// ErrUnrecordedNamespace means a namespace that would be a tenant namespace exists, but
// this cluster never made it one.
var ErrUnrecordedNamespace = errors.New("the namespace exists, but this cluster never made it a tenant namespace")

// How ensureNamespace got the tenant namespace.
const (
	// created now: nothing is in it yet.
	created = iota + 1
	// adopted on the administrator's word (adopt): it existed without a record.
	adopted
	// designated by its creator: it existed without a record, made with the tenant labels
	// by someone who may make tenant records (DesignatedByCreator): a run of liqoctl cut
	// off between the namespace and its record, Liqo's liqoctl, another administrator.
	designated
)

// ensuredNamespace is a namespace ensureNamespace made or took, with who designated it
// (designated only).
type ensuredNamespace struct {
	*corev1.Namespace
	creator string
}

// ensureNamespace creates liqo-tenant-<remoteID>, or, with adopt, takes the existing
// tenant namespace of remoteID (found by its labels, or by that name). Without adopt, an
// existing namespace of that name is taken only when its creator designated it
// (DesignatedByCreator). It returns the namespace and how it got it.
func ensureNamespace(ctx context.Context, c client.Client, liqoNS, remoteID string, adopt bool) (ensuredNamespace, int, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(remoteID), Labels: TenantNamespaceLabels(remoteID)}}
	ns.Labels[wire.ManagedByLabel] = wire.ManagedByValue
	if adopt {
		if name, err := findTenantNamespace(ctx, c, remoteID); err == nil {
			ns.Name = name
		}
	}
	err := c.Create(ctx, ns)
	if err == nil {
		return ensuredNamespace{Namespace: ns}, created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return ensuredNamespace{}, 0, fmt.Errorf("creating tenant namespace %q: %w", ns.Name, err)
	}
	var existing corev1.Namespace
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), &existing); err != nil {
		if !adopt {
			return ensuredNamespace{}, 0, unrecorded(ns.Name, fmt.Sprintf(", which could not be read (%v)", err))
		}
		return ensuredNamespace{}, 0, fmt.Errorf("reading namespace %q: %w", ns.Name, err)
	}
	if existing.DeletionTimestamp != nil {
		return ensuredNamespace{}, 0, fmt.Errorf("namespace %q is being deleted (by an earlier unauthenticate?): wait for it to be gone (kubectl get namespace %s), then retry", ns.Name, ns.Name)
	}
	if !adopt {
		by, ok, err := DesignatedByCreator(ctx, c, liqoNS, &existing, remoteID)
		if err != nil {
			return ensuredNamespace{}, 0, unrecorded(ns.Name, fmt.Sprintf("; whether its creator designated it could not be told (%v)", err))
		}
		if ok {
			return ensuredNamespace{Namespace: &existing, creator: by.User}, designated, nil
		}
		return ensuredNamespace{}, 0, unrecorded(ns.Name, " (anyone who may create namespaces could have made it)")
	}
	if other := existing.Labels[wire.RemoteClusterIDLabel]; other != "" && other != remoteID {
		return ensuredNamespace{}, 0, fmt.Errorf("namespace %q is the tenant namespace of cluster %q, not %q", ns.Name, other, remoteID)
	}
	patch := client.MergeFrom(existing.DeepCopy())
	existing.Labels = mergeLabels(existing.Labels, TenantNamespaceLabels(remoteID))
	if err := c.Patch(ctx, &existing, patch); err != nil {
		return ensuredNamespace{}, 0, fmt.Errorf("labelling namespace %q as tenant namespace: %w", ns.Name, err)
	}
	return ensuredNamespace{Namespace: &existing}, adopted, nil
}

// unrecorded is ErrUnrecordedNamespace for namespace name, with why it was not taken, and
// what to do.
func unrecorded(name, why string) error {
	return fmt.Errorf("%w: namespace %q%s. If you made it, or an older liqo-auth or Liqo did, run the command again with --adopt-tenant-namespace; otherwise delete it", ErrUnrecordedNamespace, name, why)
}

// findTenantNamespace looks a tenant namespace of remoteID up by its labels, to adopt it.
func findTenantNamespace(ctx context.Context, c client.Reader, remoteID string) (string, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabels(TenantNamespaceLabels(remoteID))); err != nil {
		return "", fmt.Errorf("looking up the tenant namespace of cluster %q: %w", remoteID, err)
	}
	switch len(list.Items) {
	case 0:
		return "", fmt.Errorf("%w for cluster %q", ErrTenantNamespaceNotFound, remoteID)
	case 1:
		return list.Items[0].Name, nil
	default:
		return "", fmt.Errorf("%d namespaces are labelled as tenant namespace of cluster %q; remove all but one", len(list.Items), remoteID)
	}
}

// getBinding reads liqo-auth-manager's RoleBinding in tenant namespace ns (nil: none).
func getBinding(ctx context.Context, c client.Reader, liqoNS, ns string) (*rbacv1.RoleBinding, error) {
	var current rbacv1.RoleBinding
	err := c.Get(ctx, client.ObjectKeyFromObject(access.ForgeManagerTenantBinding(liqoNS, ns)), &current)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading RoleBinding %s/%s: %w", ns, wire.ManagerName, err)
	}
	return &current, nil
}

// ensureManagerBinding binds, in tenant namespace ns, liqo-auth-manager's ServiceAccount
// to the per-tenant ClusterRole, given the binding there now (nil: none): the manager
// writes Secrets, Roles and RoleBindings only in namespaces an administrator made tenant
// namespaces (and in the Liqo namespace).
func ensureManagerBinding(ctx context.Context, c client.Client, liqoNS, ns string, current *rbacv1.RoleBinding) error {
	want := access.ForgeManagerTenantBinding(liqoNS, ns)
	if current != nil {
		if current.RoleRef == want.RoleRef && equality.Semantic.DeepEqual(current.Subjects, want.Subjects) {
			return nil
		}
		// roleRef is immutable: replace the binding.
		if err := c.Delete(ctx, current); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing RoleBinding %s/%s: %w", ns, want.Name, err)
		}
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

// EnsureManagerTenantBinding binds, in tenant namespace ns, liqo-auth-manager's
// ServiceAccount to its per-tenant ClusterRole, unless exactly that binding is there.
func EnsureManagerTenantBinding(ctx context.Context, c client.Client, liqoNS, ns string) error {
	binding, err := getBinding(ctx, c, liqoNS, ns)
	if err != nil {
		return err
	}
	return ensureManagerBinding(ctx, c, liqoNS, ns, binding)
}
