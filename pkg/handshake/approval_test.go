package handshake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestApprovalWait: a key waiting for approval keeps a waiting Pair waiting, said once,
// and ends the wait of another with ErrApprovalPending; a denial the provider's record
// confirms ends it with ErrDenied and the administrator's reason; a denial only the status
// says (a status writer's) does not; an Approved condition older than the spec says
// nothing.
func TestApprovalWait(t *testing.T) {
	const id, fp = "cl-c", "sha256:k"
	tenant := func(reason string, status metav1.ConditionStatus, gen int64) *authv1beta1.Tenant {
		return &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: id, Generation: 2}, Spec: authv1beta1.TenantSpec{ClusterID: id},
			Status: authv1beta1.TenantStatus{ObservedGeneration: 2, AcceptedKeyFingerprint: fp, Conditions: []metav1.Condition{
				{Type: authv1beta1.ConditionApproved, Status: status, Reason: reason, Message: "status says " + reason, ObservedGeneration: gen}}}}
	}
	side := func(decision *cluster.Approval) (*Side, *lines) {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
		if decision != nil {
			if err := cluster.UpdateTenantRecord(context.Background(), c, c, "liqo", id, true, func(r *cluster.TenantRecord) error { r.Approval = decision; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		l := &lines{}
		return &Side{Scope: Remote, Client: c, Namespace: "liqo", Report: l}, l
	}
	denial := &cluster.Approval{Decision: cluster.Denied, KeyFingerprint: fp, Reason: "not a customer \x1b[2J", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, tc := range []struct {
		name    string
		tenant  *authv1beta1.Tenant
		record  *cluster.Approval
		wait    bool
		waiting bool
		err     error
		says    int
	}{
		{"no condition", &authv1beta1.Tenant{Spec: authv1beta1.TenantSpec{ClusterID: id}}, nil, true, false, nil, 0},
		{"approved", tenant(authv1beta1.ReasonApproved, metav1.ConditionTrue, 2), nil, true, false, nil, 0},
		{"pending, waiting: said once", tenant(authv1beta1.ReasonApprovalPending, metav1.ConditionFalse, 2), nil, true, true, nil, 1},
		{"pending, not waiting", tenant(authv1beta1.ReasonApprovalPending, metav1.ConditionFalse, 2), nil, false, true, ErrApprovalPending, 0},
		{"pending for an older spec: not known yet", tenant(authv1beta1.ReasonApprovalPending, metav1.ConditionFalse, 1), nil, false, false, nil, 0},
		{"denied, the record says so", tenant(authv1beta1.ReasonApprovalDenied, metav1.ConditionFalse, 2), denial, true, true, ErrDenied, 0},
		{"denied by the status only", tenant(authv1beta1.ReasonApprovalDenied, metav1.ConditionFalse, 2), &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: fp}, true, true, nil, 0},
		// A denial is of the cluster: another key of a denied cluster stays denied.
		{"denied, another key in the record", tenant(authv1beta1.ReasonApprovalDenied, metav1.ConditionFalse, 2), &cluster.Approval{Decision: cluster.Denied, KeyFingerprint: "sha256:old", Reason: denial.Reason, At: denial.At}, true, true, ErrDenied, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l := side(tc.record)
			a := approvalWaitOf(withApprovalWait(context.Background(), tc.wait))
			for range 2 {
				waiting, _, err := a.check(context.Background(), s, tc.tenant)
				if waiting != tc.waiting || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Fatalf("waiting %v, err %v", waiting, err)
				}
				if errors.Is(err, ErrDenied) && (!strings.Contains(err.Error(), "not a customer") || strings.Contains(err.Error(), "\x1b")) {
					t.Errorf("the denial does not carry the reason, escaped: %q", err)
				}
			}
			if len(*l) != tc.says {
				t.Errorf("said %q", *l)
			}
		})
	}
	if !approvalWaitOf(context.Background()).wait {
		t.Error("a wait without a word of its Pair does not wait for the approval")
	}
}
