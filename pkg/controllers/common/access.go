package common

import (
	"context"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// EnsureControlled creates or repairs the Roles and RoleBindings objs, controlled by owner.
// When onlyRepair is set, missing objects are not created (nothing new is granted), and
// granted reports that some were missing.
func EnsureControlled(ctx context.Context, c client.Client, owner client.Object, objs []client.Object, onlyRepair bool) (granted bool, err error) {
	granted = true
	for _, want := range objs {
		if err := controllerutil.SetControllerReference(owner, want, c.Scheme()); err != nil {
			return false, err
		}
		current := want.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(want), current)
		switch {
		case apierrors.IsNotFound(err):
			if onlyRepair {
				granted = false
				continue
			}
			if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, fmt.Errorf("creating %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
			}
		case err != nil:
			return false, err
		case !sameAccess(current, want):
			// roleRef is immutable: replace the object rather than patch it.
			if err := c.Delete(ctx, current); client.IgnoreNotFound(err) != nil {
				return false, err
			}
			if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
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
		c := current.(*rbacv1.Role)
		return reflect.DeepEqual(c.Rules, w.Rules) && c.Annotations[cluster.GrantedResourcesAnnotation] == w.Annotations[cluster.GrantedResourcesAnnotation]
	}
	return false
}

// DeleteControlled deletes those of objs (looked up live through r) that owner controls.
// An object of the same name controlled by anything else is left alone.
func DeleteControlled(ctx context.Context, c client.Client, r client.Reader, owner client.Object, objs []client.Object) error {
	for _, obj := range objs {
		if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != owner.GetUID() {
			continue
		}
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
