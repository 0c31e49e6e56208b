package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TenantNamespaces maps each designated tenant namespace to the remote cluster it is the
// tenant namespace of. Readers that list objects across the cluster (liqoctl info,
// verify) keep only an object in the designated namespace of the peer it names: a
// namespace writer elsewhere must not add a peer, nor hide one.
type TenantNamespaces map[string]string

// Holds reports whether ns is the designated tenant namespace of remoteID.
func (t TenantNamespaces) Holds(ns, remoteID string) bool {
	return remoteID != "" && t[ns] == remoteID
}

// DesignatedTenantNamespaces are the namespaces this cluster's tenant records name, each
// still the one recorded (same UID) and still carrying the protocol's labels: the same
// test as VerifyTenantNamespace, in two requests whatever the number of peers (the
// records, and the namespaces labelled as tenant namespaces).
func DesignatedTenantNamespaces(ctx context.Context, c client.Reader, liqoNS string) (TenantNamespaces, error) {
	records, err := ListTenantRecords(ctx, c, liqoNS)
	if err != nil {
		return nil, fmt.Errorf("reading the tenant records: %w", err)
	}
	return DesignatedBy(ctx, c, records)
}

// DesignatedBy is DesignatedTenantNamespaces for the tenant records already read.
func DesignatedBy(ctx context.Context, c client.Reader, records []*TenantRecord) (TenantNamespaces, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabels{wire.TenantNamespaceLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing the tenant namespaces: %w", err)
	}
	byName := map[string]*corev1.Namespace{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	out := TenantNamespaces{}
	for _, rec := range records {
		ns := byName[rec.Namespace]
		if rec.Namespace != "" && ns != nil && ns.UID == rec.NamespaceUID && IsTenantNamespaceOf(ns, rec.RemoteID) {
			out[ns.Name] = rec.RemoteID
		}
	}
	return out, nil
}

// LiqoTenantNamespaces are, on a cluster that runs Liqo's controllers (which keep no
// records), the namespaces named liqo-tenant-<id> that carry the labels of the peer <id>:
// the only ones FindLiqoTenantNamespace takes.
func LiqoTenantNamespaces(ctx context.Context, c client.Reader) (TenantNamespaces, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabels{wire.TenantNamespaceLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing the tenant namespaces: %w", err)
	}
	out := TenantNamespaces{}
	for i := range list.Items {
		ns := &list.Items[i]
		id := ns.Labels[wire.RemoteClusterIDLabel]
		if ns.Name == wire.TenantNamespaceName(id) && IsTenantNamespaceOf(ns, id) {
			out[ns.Name] = id
		}
	}
	return out, nil
}
