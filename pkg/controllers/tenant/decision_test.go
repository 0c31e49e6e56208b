package tenant

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// TestDecideCertificate table-tests the certificate decision: each outcome, and that the
// first rule that applies wins.
func TestDecideCertificate(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cert := func(renewAfter time.Duration) *authv1beta1.CertificateInfo {
		return &authv1beta1.CertificateInfo{SerialNumber: "abc", RenewAfter: &metav1.Time{Time: now.Add(renewAfter)}}
	}
	const (
		active   = authv1beta1.TenantConditionActive
		cordoned = authv1beta1.TenantConditionCordoned
		drained  = authv1beta1.TenantConditionDrained
	)
	refuse := func(reason, evType string) certAction {
		return certAction{verb: certRefuse, reason: reason, eventType: evType}
	}
	pending := approvalVerdict{relevant: true, reason: authv1beta1.ReasonApprovalPending, message: "waits"}
	denied := approvalVerdict{relevant: true, reason: authv1beta1.ReasonApprovalDenied, message: "denied"}
	approved := approvalVerdict{relevant: true, approved: true, reason: authv1beta1.ReasonApproved, message: "approved"}
	for _, tc := range []struct {
		name        string
		state       authv1beta1.TenantCondition
		published   *authv1beta1.CertificateInfo
		renewSerial string
		canPublish  bool
		want        certAction
		approval    approvalVerdict
	}{
		{"approval pending: refused, Normal", active, nil, "", true, refuse(authv1beta1.ReasonApprovalPending, corev1.EventTypeNormal), pending},
		{"approval pending wins over Drained", drained, nil, "", true, refuse(authv1beta1.ReasonApprovalPending, corev1.EventTypeNormal), pending},
		{"approval pending wins over an unknown API server", active, nil, "", false, refuse(authv1beta1.ReasonApprovalPending, corev1.EventTypeNormal), pending},
		{"denied: refused, Warning", active, nil, "", true, refuse(authv1beta1.ReasonApprovalDenied, corev1.EventTypeWarning), denied},
		{"denied wins over Cordoned", cordoned, nil, "", true, refuse(authv1beta1.ReasonApprovalDenied, corev1.EventTypeWarning), denied},
		{"denied, a certificate held and due: nothing, not renewed", active, cert(-time.Hour), "abc", true, certAction{verb: certNothing}, denied},
		{"approved: issue", active, nil, "", true, certAction{verb: certIssue}, approved},
		{"approved, Cordoned: the state still decides", cordoned, nil, "", true, refuse(authv1beta1.ReasonCordonedNoCertificate, corev1.EventTypeNormal), approved},
		{"approved, due: renew", active, cert(0), "", true, certAction{verb: certRenew}, approved},
		{"no certificate: issue", active, nil, "", true, certAction{verb: certIssue}, approvalVerdict{}},
		{"the empty state is Active", "", nil, "", true, certAction{verb: certIssue}, approvalVerdict{}},
		{"renewal time ahead: wait until it", active, cert(time.Hour), "", true, certAction{verb: certWait, requeueAfter: time.Hour}, approvalVerdict{}},
		{"renewal time a nanosecond ahead: wait", active, cert(time.Nanosecond), "", true, certAction{verb: certWait, requeueAfter: time.Nanosecond}, approvalVerdict{}},
		{"renewal time exactly reached: renew", active, cert(0), "", true, certAction{verb: certRenew}, approvalVerdict{}},
		{"renewal time passed (certificate expired): renew", active, cert(-48 * time.Hour), "", true, certAction{verb: certRenew}, approvalVerdict{}},
		{"the record names the published serial: renew ahead of time", active, cert(time.Hour), "abc", true, certAction{verb: certRenew}, approvalVerdict{}},
		{"the record names another serial: wait", active, cert(time.Hour), "def", true, certAction{verb: certWait, requeueAfter: time.Hour}, approvalVerdict{}},
		{"Drained, no certificate: refused, Normal", drained, nil, "", true, refuse(authv1beta1.ReasonDrainedNoCertificate, corev1.EventTypeNormal), approvalVerdict{}},
		{"Drained wins over a due renewal: nothing", drained, cert(-time.Hour), "abc", true, certAction{verb: certNothing}, approvalVerdict{}},
		{"Drained wins over an unknown API server", drained, nil, "", false, refuse(authv1beta1.ReasonDrainedNoCertificate, corev1.EventTypeNormal), approvalVerdict{}},
		{"Cordoned, no certificate: refused, Normal", cordoned, nil, "", true, refuse(authv1beta1.ReasonCordonedNoCertificate, corev1.EventTypeNormal), approvalVerdict{}},
		{"Cordoned wins over an unknown API server", cordoned, nil, "", false, refuse(authv1beta1.ReasonCordonedNoCertificate, corev1.EventTypeNormal), approvalVerdict{}},
		{"Cordoned, a certificate held: renewed when due", cordoned, cert(0), "", true, certAction{verb: certRenew}, approvalVerdict{}},
		{"Cordoned, a certificate held: wait while not due", cordoned, cert(time.Minute), "", true, certAction{verb: certWait, requeueAfter: time.Minute}, approvalVerdict{}},
		{"not due wins over an unknown API server", active, cert(time.Minute), "", false, certAction{verb: certWait, requeueAfter: time.Minute}, approvalVerdict{}},
		{"unknown API server, due: refused, Warning", active, cert(0), "", false, refuse(authv1beta1.ReasonAPIServerUnknown, corev1.EventTypeWarning), approvalVerdict{}},
		{"unknown API server, no certificate: refused, Warning", active, nil, "", false, refuse(authv1beta1.ReasonAPIServerUnknown, corev1.EventTypeWarning), approvalVerdict{}},
	} {
		got := decideCertificate(certificateFacts{state: tc.state, published: tc.published, renewSerial: tc.renewSerial, canPublish: tc.canPublish, approval: tc.approval, now: now})
		if got.verb == certRefuse && got.message == "" {
			t.Errorf("%s: a refusal without a message", tc.name)
		}
		got.message = ""
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestAfterIssuance table-tests what an issuance came to.
func TestAfterIssuance(t *testing.T) {
	pending := &issuer.Issuance{Reason: authv1beta1.ReasonCertificatePending, Message: "waiting", RequeueAfter: 7 * time.Second}
	denied := &issuer.Issuance{Reason: authv1beta1.ReasonCSRDenied, Message: "denied", RequeueAfter: 0}
	perms := &issuer.Issuance{Reason: authv1beta1.ReasonClusterIDHasPermissions, Message: "perms", RequeueAfter: permissionsRecheck}
	for _, tc := range []struct {
		name     string
		is       *issuer.Issuance
		renewing bool
		want     certAction
	}{
		{"a certificate: published", &issuer.Issuance{Cert: testCert(t), RequeueAfter: time.Hour}, false, certAction{verb: certPublish}},
		{"a renewed certificate: published", &issuer.Issuance{Cert: testCert(t)}, true, certAction{verb: certPublish}},
		{"first issuance pending: condition, Normal", pending, false, certAction{verb: certRefuse, reason: pending.Reason, message: "waiting", eventType: corev1.EventTypeNormal, requeueAfter: 7 * time.Second}},
		{"first issuance denied: condition, Warning", denied, false, certAction{verb: certRefuse, reason: denied.Reason, message: "denied", eventType: corev1.EventTypeWarning}},
		{"first issuance refused for permissions: rechecked", perms, false, certAction{verb: certRefuse, reason: perms.Reason, message: "perms", eventType: corev1.EventTypeWarning, requeueAfter: time.Minute}},
		{"renewal pending: wait", pending, true, certAction{verb: certWait, reason: pending.Reason, message: "waiting", eventType: corev1.EventTypeNormal, requeueAfter: 7 * time.Second}},
		{"renewal failed: warned, the condition kept", perms, true, certAction{verb: certRenewFailed, reason: perms.Reason, message: "perms", eventType: corev1.EventTypeWarning, requeueAfter: time.Minute}},
	} {
		if got := afterIssuance(tc.is, tc.renewing); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestRestorable table-tests which published certificate is put back in a rewritten
// status: only the one the record says this provider published in this very Tenant, for
// the accepted key, as the control-plane certificate, not expired.
func TestRestorable(t *testing.T) {
	f := newFixture(t)
	serial := f.cert.SerialNumber.Text(16)
	rec := func(mut func(*cluster.TenantRecord)) *cluster.TenantRecord {
		r := &cluster.TenantRecord{RemoteID: f.id, PublishedCertificate: string(f.certPEM), PublishedForTenant: string(f.tenant.UID),
			Certificates: []cluster.IssuedCertificate{{Serial: serial, NotAfter: f.cert.NotAfter, KeyFingerprint: f.fp}}}
		if mut != nil {
			mut(r)
		}
		return r
	}
	accepted := f.accepted()
	for _, tc := range []struct {
		name   string
		tenant *authv1beta1.Tenant
		rec    *cluster.TenantRecord
		now    time.Time
		want   bool
	}{
		{"published here, for the accepted key", accepted, rec(nil), f.now, true},
		{"no record", accepted, nil, f.now, false},
		{"published in another Tenant", accepted, rec(func(r *cluster.TenantRecord) { r.PublishedForTenant = "other" }), f.now, false},
		{"not accepted", f.tenant, rec(nil), f.now, false},
		{"a second before it expires", accepted, rec(nil), f.cert.NotAfter.Add(-time.Second), true},
		{"expired: exactly at NotAfter", accepted, rec(nil), f.cert.NotAfter, false},
		{"not listed as issued", accepted, rec(func(r *cluster.TenantRecord) { r.Certificates = nil }), f.now, false},
		{"listed for another key", accepted, rec(func(r *cluster.TenantRecord) { r.Certificates[0].KeyFingerprint = "sha256:other" }), f.now, false},
		{"listed as a slice's", accepted, rec(func(r *cluster.TenantRecord) { r.Certificates[0].Slice = "gpu" }), f.now, false},
	} {
		if _, _, got := restorable(tc.tenant, tc.rec, tc.now); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPublishesRecorded table-tests whether a status publishes what the record says.
func TestPublishesRecorded(t *testing.T) {
	f := newFixture(t)
	serial := f.cert.SerialNumber.Text(16)
	issued := []cluster.IssuedCertificate{{Serial: serial, NotAfter: f.cert.NotAfter, KeyFingerprint: f.fp}}
	published := f.published()
	described := published.DeepCopy()
	described.Status.Certificate.SerialNumber = "ffff"
	for _, tc := range []struct {
		name   string
		tenant *authv1beta1.Tenant
		rec    *cluster.TenantRecord
		want   bool
	}{
		{"the one published in this Tenant", published, &cluster.TenantRecord{PublishedCertificate: string(f.certPEM), PublishedForTenant: string(f.tenant.UID), Certificates: issued}, true},
		{"no record", published, nil, false},
		{"the record published another in this Tenant", published, &cluster.TenantRecord{PublishedCertificate: string(f.otherPEM), PublishedForTenant: string(f.tenant.UID), Certificates: issued}, false},
		{"the record published it in another Tenant", published, &cluster.TenantRecord{PublishedCertificate: string(f.certPEM), PublishedForTenant: "other", Certificates: issued}, false},
		{"an older record: issued for the key", published, &cluster.TenantRecord{Certificates: issued}, true},
		{"an older record: not issued", published, &cluster.TenantRecord{}, false},
		{"status.certificate describes another serial", described, &cluster.TenantRecord{Certificates: issued}, false},
	} {
		if got := publishesRecorded(tc.tenant, tc.rec); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDecideApproval table-tests the approval decision: a decision about the sealed key
// first, then the setting, then a certificate held.
func TestDecideApproval(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	approved := &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: "sha256:k", At: at}
	denied := &cluster.Approval{Decision: cluster.Denied, KeyFingerprint: "sha256:k", Reason: "not a customer", At: at}
	for _, tc := range []struct {
		name     string
		f        approvalFacts
		relevant bool
		approved bool
		reason   string
	}{
		{"not required, nothing decided: no condition", approvalFacts{}, false, false, ""},
		{"not required, a certificate held: no condition", approvalFacts{holds: true}, false, false, ""},
		{"required, nothing decided: pending", approvalFacts{required: true}, true, false, authv1beta1.ReasonApprovalPending},
		{"required, approved", approvalFacts{required: true, decision: approved}, true, true, authv1beta1.ReasonApproved},
		{"required, denied", approvalFacts{required: true, decision: denied}, true, false, authv1beta1.ReasonApprovalDenied},
		{"required, a certificate held: counts as approved", approvalFacts{required: true, holds: true}, true, true, authv1beta1.ReasonApprovedHoldingCertificate},
		{"a denial holds when approval is not required", approvalFacts{decision: denied}, true, false, authv1beta1.ReasonApprovalDenied},
		{"a denial wins over a certificate held", approvalFacts{required: true, holds: true, decision: denied}, true, false, authv1beta1.ReasonApprovalDenied},
		{"an approval shows when approval is not required", approvalFacts{decision: approved}, true, true, authv1beta1.ReasonApproved},
	} {
		tc.f.fingerprint, tc.f.clusterID = "sha256:k", "cl-c"
		got := decideApproval(tc.f)
		if got.relevant != tc.relevant || got.approved != tc.approved || got.reason != tc.reason {
			t.Errorf("%s: got %+v", tc.name, got)
		}
		if got.relevant && got.message == "" {
			t.Errorf("%s: no message", tc.name)
		}
	}
	if m := decideApproval(approvalFacts{decision: denied, fingerprint: "sha256:k"}).message; !strings.Contains(m, "not a customer") {
		t.Errorf("a denial does not carry the administrator's reason: %q", m)
	}
}

// TestApprovalOfTheSealedKeyOnly: the record's decision counts only for the key it names.
func TestApprovalOfTheSealedKeyOnly(t *testing.T) {
	rec := &cluster.TenantRecord{Approval: &cluster.Approval{Decision: cluster.Approved, KeyFingerprint: "sha256:k"}}
	for fp, want := range map[string]bool{"sha256:k": true, "sha256:other": false, "": false} {
		if got := rec.ApprovalOf(fp) != nil; got != want {
			t.Errorf("ApprovalOf(%q) = %v", fp, got)
		}
	}
	if (*cluster.TenantRecord)(nil).ApprovalOf("sha256:k") != nil {
		t.Error("no record, a decision")
	}
}
