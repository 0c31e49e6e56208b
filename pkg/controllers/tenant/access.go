package tenant

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ensureAccess creates or repairs the Tenant's Role and RoleBindings, owned by the Tenant.
// When onlyRepair is set (Cordoned), missing objects are not created: nothing new is granted.
func (r *Reconciler) ensureAccess(ctx context.Context, t *authv1beta1.Tenant, onlyRepair bool) (granted bool, err error) {
	granted = true
	for _, want := range cluster.AccessObjects(t.Namespace, string(t.Spec.ClusterID)) {
		if err := controllerutil.SetControllerReference(t, want, r.Client.Scheme()); err != nil {
			return false, err
		}
		current := want.DeepCopyObject().(client.Object)
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), current)
		switch {
		case apierrors.IsNotFound(err):
			if onlyRepair {
				granted = false
				continue
			}
			if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, fmt.Errorf("creating %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
			}
		case err != nil:
			return false, err
		case !sameAccess(current, want):
			// roleRef is immutable: replace the object rather than patch it.
			if err := r.Client.Delete(ctx, current); client.IgnoreNotFound(err) != nil {
				return false, err
			}
			if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, err
			}
		}
	}
	return granted, nil
}

func sameAccess(current, want client.Object) bool {
	switch w := want.(type) {
	case *rbacv1.RoleBinding:
		c := current.(*rbacv1.RoleBinding)
		return reflect.DeepEqual(c.Subjects, w.Subjects) && c.RoleRef == w.RoleRef
	case *rbacv1.Role:
		return reflect.DeepEqual(current.(*rbacv1.Role).Rules, w.Rules)
	}
	return false
}

// revokeAccess deletes the Tenant's Role and RoleBindings, then proves that its user can
// do none of what they granted, in any namespace, and is named by no other binding.
func (r *Reconciler) revokeAccess(ctx context.Context, t *authv1beta1.Tenant) (stillAllowed string, err error) {
	if err := r.deleteOwned(ctx, t); err != nil {
		return "", err
	}
	left, err := cluster.ProveRevoked(ctx, r.Client, r.Client, string(t.Spec.ClusterID), t.Namespace, cluster.TenantRules(t.Name))
	if err != nil {
		return "", err
	}
	return strings.Join(left, "; "), nil
}

// deleteOwned deletes the Tenant's Role and RoleBindings: those of its names that it
// controls. An object of the same name controlled by anything else is left alone.
func (r *Reconciler) deleteOwned(ctx context.Context, t *authv1beta1.Tenant) error {
	for _, obj := range cluster.AccessObjects(t.Namespace, string(t.Spec.ClusterID)) {
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != t.UID {
			continue
		}
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
