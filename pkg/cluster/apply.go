package cluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ToUnstructured converts a typed object to the unstructured form a server-side apply or
// a printer wants: apiVersion and kind set, no empty status or creationTimestamp.
func ToUnstructured(obj client.Object, s *runtime.Scheme) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if st, ok := u.Object["status"].(map[string]any); ok && len(st) == 0 {
		delete(u.Object, "status")
	}
	return u, nil
}

// Apply server-side applies obj with fieldOwner, taking ownership of the fields it sets
// and only those: fields others own (an administrator's tenantCondition) are kept.
func Apply(ctx context.Context, c client.Client, obj client.Object, fieldOwner string) error {
	u, err := ToUnstructured(obj, c.Scheme())
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}
