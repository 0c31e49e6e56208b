// Package placement decides where an object may be: whether a namespace is the tenant
// namespace of a peer by this cluster's own record, a Secret read only in its recorded
// namespace, and the administrator's state in force for a Tenant.
package placement

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// Placement decides whether a namespace is the tenant namespace of a remote cluster, by
// this cluster's own record (cluster.VerifyTenantNamespace), never by the namespace's
// labels alone. It reads the cache first and, when the cache says no, the API server: a
// record or namespace made a moment ago may not be cached yet, and a refusal must be true.
type Placement struct {
	// Cache and Live read the cluster (Live may be nil).
	Cache, Live client.Reader
	// LiqoNamespace holds the tenant records.
	LiqoNamespace string
}

// Verify reports whether ns is the tenant namespace of remoteID, and why not.
func (p Placement) Verify(ctx context.Context, ns, remoteID string) (ok bool, why string, err error) {
	ok, why, err = cluster.VerifyTenantNamespace(ctx, p.Cache, p.LiqoNamespace, ns, remoteID)
	if err != nil || ok || p.Live == nil {
		return ok, why, err
	}
	return cluster.VerifyTenantNamespace(ctx, p.Live, p.LiqoNamespace, ns, remoteID)
}

// PlacedSecret reads the Secret of a request and returns it, with the remote cluster its
// label names, only when it is named name and sits in that cluster's tenant namespace (as
// p decides). A
// misplaced Secret gets a Warning Event with reason misplaced and is ignored (nil).
func PlacedSecret(ctx context.Context, c client.Reader, p Placement, rec events.EventRecorder, key client.ObjectKey, name, misplaced, action string) (*corev1.Secret, string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	if s.Name != name || s.DeletionTimestamp != nil {
		return nil, "", nil
	}
	remote := s.Labels[wire.RemoteClusterIDLabel]
	ok, why, err := p.Verify(ctx, s.Namespace, remote)
	if err != nil || !ok {
		if err == nil {
			rec.Eventf(s, nil, corev1.EventTypeWarning, misplaced, action, "ignored: %s", why)
		}
		return nil, "", err
	}
	return s, remote, nil
}

// TenantState reads the administrative state in force for Tenant t: the stricter of its
// spec.tenantCondition and the state the provider's administrator recorded for its
// cluster (cluster.StateInForce). The record is read through c (the cache, which a
// record's change reaches before it enqueues the Tenant again).
func TenantState(ctx context.Context, c client.Reader, liqoNS string, t *authv1beta1.Tenant) (authv1beta1.TenantCondition, error) {
	rec, err := cluster.GetTenantRecord(ctx, c, liqoNS, string(t.Spec.ClusterID))
	if err != nil {
		return "", err
	}
	return cluster.StateInForce(rec, t.Spec.TenantCondition), nil
}
