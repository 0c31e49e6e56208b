package crds

import (
	"slices"
	"testing"
)

// TestShortNames: each kind has the short name Liqo gives it, and ResourceSlice's matters
// most: since Kubernetes 1.34 plain "resourceslice" names resource.k8s.io's (dynamic
// resource allocation), so `kubectl get rslice` is how users reach ours.
func TestShortNames(t *testing.T) {
	all, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ResourceSlice": "rslice", "Tenant": "tn", "Identity": "id"}
	for _, crd := range all {
		if w, ok := want[crd.Spec.Names.Kind]; ok && !slices.Contains(crd.Spec.Names.ShortNames, w) {
			t.Errorf("%s has short names %v, want %s", crd.Spec.Names.Kind, crd.Spec.Names.ShortNames, w)
		}
		for _, sn := range crd.Spec.Names.ShortNames {
			if slices.Contains([]string{"rs", "resourceslice", "ns", "tenant"}, sn) {
				t.Errorf("%s short name %q clashes with a name Kubernetes or kubectl users already mean", crd.Spec.Names.Kind, sn)
			}
		}
	}
}
