// Package ownedrbac keeps the RBAC objects a controller owns for a peer: creates or
// repairs them under a controller reference and deletes only what it controls.
package ownedrbac

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// EnsureControlled creates or repairs objs (Roles and RoleBindings), controlled by owner:
// the Roles at once, then the bindings at once. When onlyRepair is set (Cordoned), missing
// objects are not created: nothing new is granted, and granted says so. An object of one
// of those names that grants anything else, or that owner does not control, is replaced: a
// binding made by someone else must not decide what the owner's subject may do, and one an
// earlier owner of the name left (orphaned by its deletion) would outlive this owner, whose
// garbage collection and finalize take only what it controls. live reads what the cache
// cannot show.
func EnsureControlled(ctx context.Context, c client.Client, live client.Reader, owner client.Object, objs []client.Object, onlyRepair bool) (granted bool, err error) {
	for _, want := range objs {
		if err := controllerutil.SetControllerReference(owner, want, c.Scheme()); err != nil {
			return false, err
		}
	}
	// Roles first, then the bindings, each group at once: binding a Role that does not
	// exist yet is refused to any binder without the bind verb on it, as the manager's
	// ServiceAccount is (the API server cannot check that it holds the Role's rules).
	var missing atomic.Bool
	for _, bindings := range []bool{false, true} {
		var eg errgroup.Group
		for _, want := range objs {
			if _, isBinding := want.(*rbacv1.RoleBinding); isBinding != bindings {
				continue
			}
			eg.Go(func() error {
				present, err := ensureControlled(ctx, c, live, owner, want, onlyRepair)
				if !present {
					missing.Store(true)
				}
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			return false, err
		}
	}
	return !missing.Load(), nil
}

func ensureControlled(ctx context.Context, c client.Client, live client.Reader, owner, want client.Object, onlyRepair bool) (present bool, err error) {
	current := want.DeepCopyObject().(client.Object)
	err = c.Get(ctx, client.ObjectKeyFromObject(want), current)
	switch {
	case apierrors.IsNotFound(err):
		if onlyRepair {
			return false, nil
		}
		err = c.Create(ctx, want)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
		}
		// It exists, and the cache does not show it: read it as it is.
		if getErr := live.Get(ctx, client.ObjectKeyFromObject(want), current); getErr != nil {
			return false, getErr
		}
		if sameAccess(current, want) && metav1.IsControlledBy(current, owner) {
			return true, nil
		}
	case err != nil:
		return false, err
	case sameAccess(current, want) && metav1.IsControlledBy(current, owner):
		return true, nil
	}
	// roleRef is immutable: replace the object rather than patch it.
	uid := current.GetUID()
	if err := c.Delete(ctx, current, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	if err := c.Create(ctx, want); err != nil {
		return false, fmt.Errorf("replacing %T %s/%s: %w", want, want.GetNamespace(), want.GetName(), err)
	}
	return true, nil
}

func sameAccess(current, want client.Object) bool {
	switch w := want.(type) {
	case *rbacv1.RoleBinding:
		c := current.(*rbacv1.RoleBinding)
		return reflect.DeepEqual(c.Subjects, w.Subjects) && c.RoleRef == w.RoleRef
	case *rbacv1.Role:
		c := current.(*rbacv1.Role)
		return reflect.DeepEqual(c.Rules, w.Rules) && c.Annotations[wire.GrantedResourcesAnnotation] == w.Annotations[wire.GrantedResourcesAnnotation]
	}
	return false
}

// DeleteControlled deletes those of objs (looked up through r) that owner controls, and
// their orphans (DeleteOrphans). An object of the same name controlled by anything else is
// left alone.
func DeleteControlled(ctx context.Context, c client.Client, r client.Reader, owner client.Object, objs []client.Object) error {
	return deleteWhere(ctx, c, r, objs, func(ref *metav1.OwnerReference) bool { return ref.UID == owner.GetUID() })
}

// DeleteOrphans deletes those of objs (looked up through r) that nothing controls and that
// carry every label they were forged with, this project's among them: what an owner of
// their name made, whose controller reference the garbage collector took off when that
// owner was deleted with propagationPolicy Orphan (the tenant and its peering user may
// delete their Tenant so): left there, they would keep the access of an owner that is gone
// (TestAttack52DeletedWithOrphanPropagation). objs forged without this project's label
// never match.
func DeleteOrphans(ctx context.Context, c client.Client, r client.Reader, objs []client.Object) error {
	return deleteWhere(ctx, c, r, objs, func(*metav1.OwnerReference) bool { return false })
}

// deleteWhere deletes those of objs (looked up through r) whose controller ours accepts, or
// that are orphans of what objs describe.
func deleteWhere(ctx context.Context, c client.Client, r client.Reader, objs []client.Object, ours func(*metav1.OwnerReference) bool) error {
	for _, obj := range objs {
		forged := maps.Clone(obj.GetLabels())
		if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if ref := metav1.GetControllerOf(obj); ref == nil && !orphanOf(obj, forged) || ref != nil && !ours(ref) {
			continue
		}
		uid := obj.GetUID()
		if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// orphanOf says whether obj, which nothing controls, is what this project forged with
// labels forged: it carries them all, this project's managed-by label among them.
func orphanOf(obj client.Object, forged map[string]string) bool {
	if forged[wire.ManagedByLabel] != wire.ManagedByValue {
		return false
	}
	got := obj.GetLabels()
	for k, v := range forged {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Finalize removes what owner caused, and only that: those of objs it controls and the
// CertificateSigningRequests iss made for its UID; then it takes off finalizer, when owner
// carries it. It runs for every owner being deleted, finalizer or not (whoever writes the
// owner may take the finalizer off and keep one of its own, and the owner, held, would
// keep its access). With the finalizer, this is the owner's last reconcile, and what it
// caused is looked up live, where what was made a moment ago is found; without it, the
// cache (c) serves: each object made for the owner afterwards brings its reconcile back.
func Finalize(ctx context.Context, c client.Client, live client.Reader, iss *issuer.Issuer, owner client.Object, finalizer string, objs []client.Object) error {
	ours := controllerutil.ContainsFinalizer(owner, finalizer)
	var reader client.Reader = c
	if ours {
		reader = live
	}
	if err := DeleteControlled(ctx, c, reader, owner, objs); err != nil {
		return err
	}
	if err := iss.DeleteCSRs(ctx, reader, owner.GetUID(), false); err != nil {
		return err
	}
	if !ours {
		return nil
	}
	iss.Forget(owner.GetUID())
	patch := client.MergeFrom(owner.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(owner, finalizer)
	return client.IgnoreNotFound(c.Patch(ctx, owner, patch))
}
