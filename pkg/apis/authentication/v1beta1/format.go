package v1beta1

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// FormatResources renders a resource list as name=quantity pairs, sorted.
func FormatResources(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "no resources"
	}
	parts := make([]string, 0, len(l))
	for n, q := range l {
		parts = append(parts, string(n)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
