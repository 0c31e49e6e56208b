package info

import (
	"context"
	"crypto"
	"time"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// States of an Approval in Report.
const (
	approvalPending = "Pending"
	approvalDenied  = "Denied"
)

// Approval is a consumer whose key waits for this provider's administrator, or that they
// denied.
type Approval struct {
	Cluster        string `json:"cluster"`
	Namespace      string `json:"namespace"`
	State          string `json:"state"`
	KeyFingerprint string `json:"keyFingerprint"`
	// Since is when the key was accepted (Pending) or denied (Denied).
	Since *time.Time `json:"since,omitempty"`
	// Reason is the administrator's reason of a denial.
	Reason string `json:"reason,omitempty"`
}

// approvals lists the placed Tenants whose sealed key waits for approval or was denied.
// Each is decided from what only this cluster's administrator and manager write: the
// key from the acceptance this provider sealed, the decision from the tenant record, and
// whether approval is required from liqo-auth-config; never from the Tenant's conditions,
// which a status writer may set.
func approvals(ctx context.Context, s *handshake.Side, providerKey crypto.PublicKey, tenants []authv1beta1.Tenant, records []*cluster.TenantRecord) ([]Approval, error) {
	cfg, err := cluster.GetConfig(ctx, s.Client, s.Namespace)
	if err != nil {
		return nil, s.Explain(err, "reading the configuration")
	}
	byID := map[string]*cluster.TenantRecord{}
	for _, rec := range records {
		byID[rec.RemoteID] = rec
	}
	out := []Approval{}
	for i := range tenants {
		t := &tenants[i]
		fp, err := handshake.SealedKey(t, providerKey)
		if err != nil {
			continue // no handshake accepted: nothing to decide yet
		}
		rec := byID[string(t.Spec.ClusterID)]
		a := Approval{Cluster: string(t.Spec.ClusterID), Namespace: t.Namespace, KeyFingerprint: fp}
		switch d := rec.ApprovalOf(fp); {
		case d != nil && d.Decision == cluster.Denied:
			at := d.At.UTC()
			a.State, a.Reason, a.Since = approvalDenied, d.Reason, &at
		case d == nil && cfg.RequireApproval && !holds(rec, t):
			a.State, a.Since = approvalPending, timeOf(t.Status.AcceptedAt)
		default:
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// holds says whether the record says this provider published a certificate in Tenant t:
// one that was issued before approval was required counts as approved.
func holds(rec *cluster.TenantRecord, t *authv1beta1.Tenant) bool {
	_, _, ok := rec.PublishedIn(string(t.UID))
	return ok
}
