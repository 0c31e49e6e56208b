// Package common holds what several reconcilers share: the tenant-namespace check,
// label predicates and condition bookkeeping.
package common

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
