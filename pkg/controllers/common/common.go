// Package common holds what several reconcilers share: the tenant-namespace check,
// label predicates and condition bookkeeping.
package common

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// IsTenantNamespace reports whether namespace name is the tenant namespace of remoteID.
// A namespace that does not exist (or is not cached because it lacks the tenant label)
// is not.
func IsTenantNamespace(ctx context.Context, c client.Reader, name, remoteID string) (bool, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return cluster.IsTenantNamespaceOf(&ns, remoteID), nil
}

// HasLabel selects objects carrying label key=value.
func HasLabel(key, value string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[key] == value })
}

// SetCondition sets a condition and reports whether anything but its timestamp changed.
func SetCondition(conds *[]metav1.Condition, typ string, ok bool, reason, msg string, generation int64) bool {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	old := meta.FindStatusCondition(*conds, typ)
	changed := old == nil || old.Status != status || old.Reason != reason || old.Message != msg || old.ObservedGeneration != generation
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation})
	return changed
}

// PlacedSecret reads the Secret of a request and returns it, with the remote cluster its
// label names, only when it is named name and sits in that cluster's tenant namespace. A
// misplaced Secret gets a Warning Event with reason misplaced and is ignored (nil).
func PlacedSecret(ctx context.Context, c client.Reader, rec events.EventRecorder, key client.ObjectKey, name, misplaced, action string) (*corev1.Secret, string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	if s.Name != name || s.DeletionTimestamp != nil {
		return nil, "", nil
	}
	remote := s.Labels[cluster.RemoteClusterIDLabel]
	ok, err := IsTenantNamespace(ctx, c, s.Namespace, remote)
	if err != nil || !ok {
		if err == nil {
			rec.Eventf(s, nil, corev1.EventTypeWarning, misplaced, action,
				"ignored: namespace %q is not the tenant namespace of cluster %q", s.Namespace, remote)
		}
		return nil, "", err
	}
	return s, remote, nil
}
