package authmanager

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// StaleLease reports, when a manager held the Lease in the Liqo namespace ns but no longer
// renews it, who held it and since when it is stale (when its last renewal expired); nil
// when the Lease is fresh, released or absent. A manager run beside a cluster that lost
// its API server exits and nothing restarts it: this is how liqoctl info and verify see it.
func StaleLease(ctx context.Context, c client.Reader, ns string, now time.Time) (holder string, since *time.Time, err error) {
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespaceOr(ns), Name: wire.ManagerName}, &lease); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, nil
		}
		return "", nil, err
	}
	holder, fresh := LeaseHolder(&lease, now)
	if fresh || holder == "" {
		return "", nil, nil
	}
	t := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second).UTC()
	return holder, &t, nil
}

// DescribeStale says since when the manager's Lease in ns is stale, and what it means.
func DescribeStale(ns, holder string, since, now time.Time) string {
	return fmt.Sprintf("liqo-auth-manager's Lease %s/%s, held by %s, went stale at %s (%s ago): the manager stopped renewing it (stopped, crashed, or lost the API server; beside a cluster, run it under a supervisor), and no certificate is renewed",
		namespaceOr(ns), wire.ManagerName, holder, since.UTC().Format(time.RFC3339), now.Sub(since).Round(time.Second))
}
