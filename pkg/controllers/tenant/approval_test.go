package tenant

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// approvalRequired is the liqo-auth-config of a provider that requires approval.
func approvalRequired() client.Object {
	return cluster.ForgeApprovalConfigMap(testLiqoNS, true)
}

// TestApprovalOnTheProvider: with approval required, a sealed Tenant gets no certificate
// and no access until the record approves its sealed key; an approval of another key, or
// an Approved condition a status writer set, changes nothing; a denial is a Warning and a
// refusal; a Tenant that published a certificate counts as approved. Nothing is created
// while it waits, and deciding again writes nothing.
func TestApprovalOnTheProvider(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tenant     func(f *fixture) *authv1beta1.Tenant
		record     func(f *fixture, r *cluster.TenantRecord)
		approved   metav1.ConditionStatus
		reason     string
		issues     bool
		eventType  string
		lastRefuse bool
	}{
		{name: "pending", tenant: (*fixture).accepted, approved: metav1.ConditionFalse, reason: authv1beta1.ReasonApprovalPending, eventType: "Normal"},
		{name: "a status writer's Approved True: still pending", tenant: func(f *fixture) *authv1beta1.Tenant {
			tn := f.accepted()
			tn.Status.Conditions = []metav1.Condition{{Type: authv1beta1.ConditionApproved, Status: metav1.ConditionTrue, Reason: authv1beta1.ReasonApproved, Message: "forged"}}
			return tn
		}, approved: metav1.ConditionFalse, reason: authv1beta1.ReasonApprovalPending},
		{name: "another key approved: pending", tenant: (*fixture).accepted, record: func(_ *fixture, r *cluster.TenantRecord) {
			r.Approval = &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: "sha256:another"}
		}, approved: metav1.ConditionFalse, reason: authv1beta1.ReasonApprovalPending, eventType: "Normal"},
		{name: "approved: issued", tenant: (*fixture).accepted, record: func(f *fixture, r *cluster.TenantRecord) {
			r.Approval = &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: f.fp}
		}, approved: metav1.ConditionTrue, reason: authv1beta1.ReasonApproved, issues: true, eventType: "Normal"},
		{name: "denied", tenant: (*fixture).accepted, record: func(f *fixture, r *cluster.TenantRecord) {
			r.Approval = &cluster.Approval{Decision: cluster.Denied, KeyFingerprint: f.fp, Reason: "unknown customer"}
		}, approved: metav1.ConditionFalse, reason: authv1beta1.ReasonApprovalDenied, eventType: "Warning", lastRefuse: true},
		{name: "a certificate held: approved, kept", tenant: (*fixture).published, record: func(f *fixture, r *cluster.TenantRecord) {
			r.PublishedCertificate, r.PublishedForTenant = string(f.certPEM), string(f.tenant.UID)
			r.Certificates = []cluster.IssuedCertificate{{Serial: f.cert.SerialNumber.Text(16), NotAfter: f.cert.NotAfter, KeyFingerprint: f.fp}}
			r.PublishedCAFingerprint, r.PublishedAPIServer = "", ""
		}, approved: metav1.ConditionTrue, reason: authv1beta1.ReasonApprovedHoldingCertificate, eventType: "Normal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var rec func(*cluster.TenantRecord)
			if tc.record != nil {
				rec = func(r *cluster.TenantRecord) { tc.record(f, r) }
			}
			w := f.newWorld(rec, tc.tenant(f), approvalRequired())
			_, got, writes, evs := w.reconcile()
			c := condition(t, got, authv1beta1.ConditionApproved)
			if c.Status != tc.approved || c.Reason != tc.reason {
				t.Fatalf("Approved is %s %s (%s)", c.Status, c.Reason, c.Message)
			}
			if tc.issues != (writes["create CertificateSigningRequest"] == 1) {
				t.Errorf("issues %v, writes %v", tc.issues, writes)
			}
			if !(tc.approved == metav1.ConditionTrue) {
				for k := range writes {
					if strings.HasPrefix(k, "create ") {
						t.Errorf("a Tenant not approved caused %s", k)
					}
				}
				for _, typ := range []string{authv1beta1.ConditionCertificateIssued, authv1beta1.ConditionAccessGranted, authv1beta1.ConditionReady} {
					want := tc.reason
					if typ == authv1beta1.ConditionAccessGranted && want == authv1beta1.ReasonApprovalDenied {
						want = authv1beta1.ReasonAccessRevoked // a denied tenant's access is revoked, as a Drained one's
					}
					if c := condition(t, got, typ); c.Status != metav1.ConditionFalse || c.Reason != want {
						t.Errorf("%s is %s %s", typ, c.Status, c.Reason)
					}
				}
			}
			if tc.eventType != "" && !hasEvent(evs, tc.eventType, tc.reason) {
				t.Errorf("no %s Event %s in %v", tc.eventType, tc.reason, evs)
			}
			if (got.Status.LastRefusal != nil) != tc.lastRefuse {
				t.Errorf("last refusal %+v", got.Status.LastRefusal)
			}
			if tc.issues {
				return
			}
			_, _, writes, evs = w.reconcile()
			if len(writes) != 0 || len(evs) != 0 {
				t.Errorf("decided again: writes %v, events %v", writes, evs)
			}
		})
	}
}

// TestApprovalNotRequired: without the setting, a Tenant has no Approved condition (one
// left from when it was required is removed) and is issued as before.
func TestApprovalNotRequired(t *testing.T) {
	f := newFixture(t)
	tn := f.accepted()
	tn.Status.Conditions = []metav1.Condition{{Type: authv1beta1.ConditionApproved, Status: metav1.ConditionFalse, Reason: authv1beta1.ReasonApprovalPending, Message: "waits"}}
	w := f.newWorld(nil, tn, cluster.ForgeApprovalConfigMap(testLiqoNS, false))
	_, got, writes, _ := w.reconcile()
	if c := meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionApproved); c != nil {
		t.Errorf("an Approved condition without approval required: %+v", c)
	}
	if writes["create CertificateSigningRequest"] != 1 {
		t.Errorf("not issued: %v", writes)
	}
}
