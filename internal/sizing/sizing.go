// Package sizing holds what the release manifest gives liqo-auth-manager's container and
// what that holds: the memory limit, the share of it the manager lets Go's heap use, and
// the fleet (consumers) a live heap per consumer fits into it (docs/operations.md,
// "Sizing a provider").
package sizing

import "k8s.io/apimachinery/pkg/api/resource"

// ManagerMemoryLimit is the memory limit of the manager's container in the release
// manifest.
const ManagerMemoryLimit = "320Mi"

// MemoryLimitShare is the part of the container's memory limit the manager gives Go's
// heap (its GOMEMLIMIT, unless set): the rest is for stacks, the binary's pages and what
// the runtime keeps outside the heap.
const MemoryLimitShare = 0.9

// HeapHeadroom is the part of Go's memory limit the live heap may fill and leave the
// collector room to work: past it, the collector runs near continuously.
const HeapHeadroom = 0.85

// Fleet is how many consumers a manager whose live heap is idleBytes without consumers
// and grows by perConsumerBytes with each holds under a container memory limit of
// limitBytes, its live heap within HeapHeadroom of its Go memory limit. It is 0 when
// perConsumerBytes is not positive or the idle heap alone does not fit.
func Fleet(limitBytes int64, idleBytes, perConsumerBytes float64) int {
	room := float64(limitBytes)*MemoryLimitShare*HeapHeadroom - idleBytes
	if perConsumerBytes <= 0 || room <= 0 {
		return 0
	}
	return int(room / perConsumerBytes)
}

// ManagerFleet is Fleet under the release manifest's limit.
func ManagerFleet(idleBytes, perConsumerBytes float64) int {
	limit := resource.MustParse(ManagerMemoryLimit)
	return Fleet(limit.Value(), idleBytes, perConsumerBytes)
}
