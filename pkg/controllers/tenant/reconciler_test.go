package tenant

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// condition returns the condition typ of t, failing when it is not there.
func condition(tb testing.TB, t *authv1beta1.Tenant, typ string) *metav1.Condition {
	tb.Helper()
	c := meta.FindStatusCondition(t.Status.Conditions, typ)
	if c == nil {
		tb.Fatalf("no condition %s in %+v", typ, t.Status.Conditions)
	}
	return c
}

// hasEvent says whether an Event of type and reason was recorded.
func hasEvent(evs []string, evType, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, evType+" "+reason+" ") })
}

// TestRefusedHandshakes: a Tenant whose handshake does not verify is refused with the
// reason of the first check that fails, a Warning Event, no finalizer and nothing
// granted; the same refusal decided again writes nothing.
func TestRefusedHandshakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(f *fixture, tn *authv1beta1.Tenant) []client.Object
		reason string
	}{
		{"no nonce", func(*fixture, *authv1beta1.Tenant) []client.Object { return nil }, authv1beta1.ReasonNonceMissing},
		{"a nonce of another cluster", func(f *fixture, _ *authv1beta1.Tenant) []client.Object {
			s := f.nonceSecret()
			s.Labels[wire.RemoteClusterIDLabel] = "cl-other"
			return []client.Object{s}
		}, authv1beta1.ReasonNonceInvalid},
		{"an expired nonce", func(f *fixture, _ *authv1beta1.Tenant) []client.Object {
			s := f.nonceSecret()
			s.CreationTimestamp = metav1.NewTime(f.now.Add(-2 * time.Hour))
			return []client.Object{s}
		}, authv1beta1.ReasonNonceExpired},
		{"a signature of another nonce", func(f *fixture, tn *authv1beta1.Tenant) []client.Object {
			tn.Spec.Signature = bytes.Repeat([]byte{1}, 64)
			return []client.Object{f.nonceSecret()}
		}, string(authn.ReasonSignatureInvalid)},
		{"an invalid cluster ID", func(f *fixture, tn *authv1beta1.Tenant) []client.Object {
			tn.Spec.ClusterID = "Not_A_Cluster_ID"
			return []client.Object{f.nonceSecret()}
		}, authv1beta1.ReasonInvalidClusterID},
		{"a Tenant named for another cluster ID", func(f *fixture, tn *authv1beta1.Tenant) []client.Object {
			tn.Spec.ClusterID = "cl-other"
			return []client.Object{f.nonceSecret()}
		}, authv1beta1.ReasonTenantNameMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tn := f.tenant.DeepCopy()
			objs := append(tc.mutate(f, tn), tn)
			w := f.newWorld(nil, objs...)
			checkRefusal(t, w, tc.reason)
		})
	}
}

// checkRefusal reconciles a Tenant whose handshake is refused for reason, twice: the
// second decision writes nothing.
func checkRefusal(t *testing.T, w *world, reason string) {
	t.Helper()
	f := w.fixture
	res, got, writes, evs := w.reconcile()
	c := condition(t, got, authv1beta1.ConditionAuthenticated)
	if c.Status != metav1.ConditionFalse || c.Reason != reason {
		t.Fatalf("Authenticated is %s %s (%s), want False %s", c.Status, c.Reason, c.Message, reason)
	}
	if ready := condition(t, got, authv1beta1.ConditionReady); ready.Status != metav1.ConditionFalse || ready.Reason != reason {
		t.Errorf("Ready is %s %s, want False %s", ready.Status, ready.Reason, reason)
	}
	if !hasEvent(evs, "Warning", reason) {
		t.Errorf("no Warning Event %s in %v", reason, evs)
	}
	if got.Status.LastRefusal == nil || got.Status.LastRefusal.Reason != reason || !got.Status.LastRefusal.Time.Equal(&metav1.Time{Time: f.now}) {
		t.Errorf("last refusal %+v, want %s at %v", got.Status.LastRefusal, reason, f.now)
	}
	if len(got.Finalizers) != 0 || got.Status.AcceptedKeyFingerprint != "" || res.RequeueAfter != 0 {
		t.Errorf("a refused Tenant got finalizers %v, acceptance %q, requeue %v", got.Finalizers, got.Status.AcceptedKeyFingerprint, res.RequeueAfter)
	}
	if want := map[string]int{"update Tenant/status": 1}; !equalCounts(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
	if _, _, writes, evs := w.reconcile(); len(writes) != 0 || len(evs) != 0 {
		t.Errorf("the same refusal decided again wrote %v, recorded %v", writes, evs)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAcceptedHandshakeWaitsForPermissionsCheck: a verified handshake is accepted, its
// nonce consumed in the record; the first certificate is refused while the cluster ID's
// user holds a binding the Tenant did not make, and decided again after
// permissionsRecheck. Nothing is asked of the signer.
func TestAcceptedHandshakeWaitsForPermissionsCheck(t *testing.T) {
	f := newFixture(t)
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "powers"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: f.id}}}
	w := f.newWorld(nil, f.tenant.DeepCopy(), f.nonceSecret(), crb)
	res, got, writes, evs := w.reconcile()
	if c := condition(t, got, authv1beta1.ConditionAuthenticated); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonHandshakeAccepted {
		t.Fatalf("Authenticated is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
	if got.Status.AcceptedKeyFingerprint != f.fp || !slices.Contains(got.Finalizers, wire.TenantFinalizer) {
		t.Errorf("acceptance %q, finalizers %v", got.Status.AcceptedKeyFingerprint, got.Finalizers)
	}
	if rec := w.record(); rec.ConsumedNonce == nil || rec.ConsumedNonce.TenantUID != string(f.tenant.UID) {
		t.Errorf("the nonce is not consumed in the record: %+v", rec.ConsumedNonce)
	}
	c := condition(t, got, authv1beta1.ConditionCertificateIssued)
	if c.Status != metav1.ConditionFalse || c.Reason != authv1beta1.ReasonClusterIDHasPermissions || !strings.Contains(c.Message, "powers") {
		t.Errorf("CertificateIssued is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
	if !hasEvent(evs, "Warning", authv1beta1.ReasonClusterIDHasPermissions) || res.RequeueAfter != permissionsRecheck || permissionsRecheck != time.Minute {
		t.Errorf("events %v, requeue %v", evs, res.RequeueAfter)
	}
	if writes["create CertificateSigningRequest"] != 0 {
		t.Errorf("a CSR was created: %v", writes)
	}
}

// TestPublishedStatusIsRepaired: what a status writer changes in what the Tenant
// publishes is put back from the record, never by issuing anew; a status that publishes
// what this provider published is left alone, with no write at all.
func TestPublishedStatusIsRepaired(t *testing.T) {
	f := newFixture(t)
	serial := f.cert.SerialNumber.Text(16)
	caFP := must(authn.CAFingerprint(f.caPEM))
	w := f.newWorld(func(r *cluster.TenantRecord) {
		r.AddCertificate(cluster.IssuedCertificate{Serial: serial, NotAfter: f.cert.NotAfter, KeyFingerprint: f.fp}, f.now)
		r.PublishedCertificate, r.PublishedForTenant = string(f.certPEM), string(f.tenant.UID)
		r.PublishedCAFingerprint, r.PublishedAPIServer = caFP, testAPIServer
	}, f.accepted())
	renewAt := renewAfterOf(f)

	// A status writer wiped what was published: the record's certificate is put back.
	res, got, writes, evs := w.reconcile()
	if got.Status.AuthParams == nil || !bytes.Equal(got.Status.AuthParams.SignedCRT, f.certPEM) || got.Status.Certificate.SerialNumber != serial {
		t.Fatalf("the published certificate was not put back: %+v", got.Status.AuthParams)
	}
	if c := condition(t, got, authv1beta1.ConditionCertificateIssued); c.Status != metav1.ConditionTrue {
		t.Errorf("CertificateIssued is %s %s", c.Status, c.Reason)
	}
	if c := condition(t, got, authv1beta1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
	if !hasEvent(evs, "Warning", authv1beta1.ReasonStatusTampered) || res.RequeueAfter != renewAt.Sub(f.now) || writes["create CertificateSigningRequest"] != 0 {
		t.Errorf("events %v, requeue %v, writes %v", evs, res.RequeueAfter, writes)
	}

	// Nothing changed: nothing is written, nothing recorded, and the reconcile comes back
	// at the renewal time.
	res, _, writes, evs = w.reconcile()
	if len(writes) != 0 || len(evs) != 0 || res.RequeueAfter != renewAt.Sub(f.now) {
		t.Fatalf("a Tenant in its steady state: writes %v, events %v, requeue %v", writes, evs, res.RequeueAfter)
	}

	tamperAndRepair(t, w, got, renewAt)
}

// tamperAndRepair: a status writer changes the CA and back-dates the renewal of got, a
// Tenant in its steady state: both are put back, with one status write, and no
// certificate is issued.
func tamperAndRepair(t *testing.T, w *world, got *authv1beta1.Tenant, renewAt time.Time) {
	t.Helper()
	f := w.fixture
	got.Status.AuthParams.CA = []byte("forged")
	got.Status.Certificate.RenewAfter = &metav1.Time{Time: f.now.Add(-time.Hour)}
	if err := w.c.Status().Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	res, got, writes, evs := w.reconcile()
	if !bytes.Equal(got.Status.AuthParams.CA, f.caPEM) || !got.Status.Certificate.RenewAfter.Time.Equal(renewAt) {
		t.Errorf("not put back: CA %q, renewAfter %v", got.Status.AuthParams.CA, got.Status.Certificate.RenewAfter)
	}
	if n := len(evs); n != 2 || !hasEvent(evs, "Warning", authv1beta1.ReasonStatusTampered) {
		t.Errorf("events %v, want two %s", evs, authv1beta1.ReasonStatusTampered)
	}
	if want := map[string]int{"update Tenant/status": 1}; !equalCounts(writes, want) || res.RequeueAfter != renewAt.Sub(f.now) {
		t.Errorf("writes %v, want %v; requeue %v", writes, want, res.RequeueAfter)
	}
}

// renewAfterOf is when the fixture's certificate is renewed.
func renewAfterOf(f *fixture) time.Time {
	return f.cert.NotAfter.Add(-f.cert.NotAfter.Sub(f.cert.NotBefore) / 3).Truncate(time.Second)
}

// TestRenewalFailureKeepsTheCertificate: a renewal the administrator asked for (the record
// names the published serial) that is refused warns and notes the refusal, but leaves the
// valid certificate published and its condition True.
func TestRenewalFailureKeepsTheCertificate(t *testing.T) {
	f := newFixture(t)
	serial := f.cert.SerialNumber.Text(16)
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "powers"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: f.id}}}
	w := f.newWorld(func(r *cluster.TenantRecord) {
		r.AddCertificate(cluster.IssuedCertificate{Serial: serial, NotAfter: f.cert.NotAfter, KeyFingerprint: f.fp}, f.now)
		r.PublishedCertificate, r.PublishedForTenant = string(f.certPEM), string(f.tenant.UID)
		r.PublishedCAFingerprint, r.PublishedAPIServer = must(authn.CAFingerprint(f.caPEM)), testAPIServer
		r.RenewSerial = serial
	}, f.accepted(), crb)
	res, got, _, evs := w.reconcile()
	if c := condition(t, got, authv1beta1.ConditionCertificateIssued); c.Status != metav1.ConditionTrue || got.Status.Certificate == nil || got.Status.Certificate.SerialNumber != serial {
		t.Errorf("CertificateIssued is %s %s, certificate %+v", c.Status, c.Reason, got.Status.Certificate)
	}
	if !hasEvent(evs, "Warning", authv1beta1.ReasonClusterIDHasPermissions) {
		t.Errorf("no Warning Event of the failed renewal in %v", evs)
	}
	if got.Status.LastRefusal == nil || got.Status.LastRefusal.Reason != authv1beta1.ReasonClusterIDHasPermissions || res.RequeueAfter != permissionsRecheck {
		t.Errorf("last refusal %+v, requeue %v", got.Status.LastRefusal, res.RequeueAfter)
	}
	if w.record().RenewSerial != serial {
		t.Errorf("the renewal asked for was forgotten before it was done")
	}
}

// TestAdministrativeStates: a Cordoned tenant without a certificate gets neither access
// nor a certificate; a Drained one loses its access (SubjectAccessReviews prove it) and
// gets no certificate. The record's state wins over an Active spec.
func TestAdministrativeStates(t *testing.T) {
	for _, tc := range []struct {
		state                           authv1beta1.TenantCondition
		accessReason, certificateReason string
	}{
		{authv1beta1.TenantConditionCordoned, authv1beta1.ReasonCordonedNoGrant, authv1beta1.ReasonCordonedNoCertificate},
		{authv1beta1.TenantConditionDrained, authv1beta1.ReasonAccessRevoked, authv1beta1.ReasonDrainedNoCertificate},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			f := newFixture(t)
			tn := f.accepted()
			tn.Spec.TenantCondition = authv1beta1.TenantConditionActive
			w := f.newWorld(func(r *cluster.TenantRecord) { r.State = string(tc.state) }, tn)
			res, got, writes, evs := w.reconcile()
			if got.Status.TenantCondition != tc.state {
				t.Errorf("state %q, want %q", got.Status.TenantCondition, tc.state)
			}
			if c := condition(t, got, authv1beta1.ConditionAccessGranted); c.Status != metav1.ConditionFalse || c.Reason != tc.accessReason {
				t.Errorf("AccessGranted is %s %s (%s)", c.Status, c.Reason, c.Message)
			}
			if c := condition(t, got, authv1beta1.ConditionCertificateIssued); c.Status != metav1.ConditionFalse || c.Reason != tc.certificateReason {
				t.Errorf("CertificateIssued is %s %s", c.Status, c.Reason)
			}
			// A False condition of type Normal records no Event (setCondition).
			if len(evs) != 0 || res.RequeueAfter != 0 {
				t.Errorf("events %v, requeue %v", evs, res.RequeueAfter)
			}
			for k := range writes {
				if strings.HasPrefix(k, "create ") {
					t.Errorf("a %s tenant caused %s", tc.state, k)
				}
			}
			if got.Status.LastRefusal != nil {
				t.Errorf("an administrative state is no refusal: %+v", got.Status.LastRefusal)
			}
		})
	}
}

// TestDrainedButStillAllowed: a Drained tenant whose user SubjectAccessReviews still
// allow is said to keep its access, with a Warning, never said revoked.
func TestDrainedButStillAllowed(t *testing.T) {
	f := newFixture(t)
	w := f.newWorld(func(r *cluster.TenantRecord) { r.State = string(authv1beta1.TenantConditionDrained) }, f.accepted())
	w.allowed = func(sar *authorizationv1.SubjectAccessReview) bool { return sar.Spec.User == f.id }
	_, got, _, evs := w.reconcile()
	if c := condition(t, got, authv1beta1.ConditionAccessGranted); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonAccessStillAllowed {
		t.Errorf("AccessGranted is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
	if !hasEvent(evs, "Warning", authv1beta1.ReasonAccessStillAllowed) {
		t.Errorf("no Warning Event in %v", evs)
	}
}

// TestNoRequestBeforeTheFinalizer: the finalizer, the access and the certificate of an
// accepted Tenant are carried out at once, but its CertificateSigningRequest, which only
// the finalizer removes, is made only once the finalizer is there. With the finalizer's
// patch refused, the reconcile fails having made no request (the Roles and bindings it
// made carry the Tenant's controller reference); once the patch goes through, the request
// is made, the certificate published and the access granted.
func TestNoRequestBeforeTheFinalizer(t *testing.T) {
	f := newFixture(t)
	w := f.newWorld(nil, f.tenant.DeepCopy(), f.nonceSecret())
	w.refuse = refusing[*authv1beta1.Tenant]("patch", "patch refused")
	w.writes.Take()
	_, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: f.id}})
	if err == nil || !strings.Contains(err.Error(), "patch refused") {
		t.Fatalf("reconcile: %v, want the finalizer's error", err)
	}
	writes := w.writes.Take()
	if writes["create CertificateSigningRequest"] != 0 || writes["update Tenant/status"] != 0 {
		t.Errorf("a request was made, or the status written, without the finalizer: %v", writes)
	}
	var roles rbacv1.RoleList
	if err := w.c.List(context.Background(), &roles, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		if ref := metav1.GetControllerOf(&r); ref == nil || ref.UID != f.tenant.UID {
			t.Errorf("Role %s made without the Tenant's controller reference: %+v", r.Name, r.OwnerReferences)
		}
	}

	w.refuse = nil
	_, got, writes, _ := w.reconcile()
	if !slices.Contains(got.Finalizers, wire.TenantFinalizer) || writes["create CertificateSigningRequest"] != 1 {
		t.Fatalf("finalizers %v, writes %v", got.Finalizers, writes)
	}
	if c := condition(t, got, authv1beta1.ConditionAccessGranted); c.Status != metav1.ConditionTrue {
		t.Errorf("AccessGranted is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
}

// TestAccessFailureBesideTheCertificate: when creating the Tenant's access fails while its
// certificate is issued beside it, the certificate is saved with the status (it is not
// issued twice, nor put back later as if a status writer had wiped it), the Tenant is not
// Ready, the reconcile fails so as to be tried again, and the next one grants the access.
func TestAccessFailureBesideTheCertificate(t *testing.T) {
	f := newFixture(t)
	w := f.newWorld(nil, f.tenant.DeepCopy(), f.nonceSecret())
	w.signs = true
	w.refuse = refusing[*rbacv1.RoleBinding]("create", "binding refused")
	w.writes.Take()
	_, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: f.id}})
	if err == nil || !strings.Contains(err.Error(), "binding refused") {
		t.Fatalf("reconcile: %v, want the access's error", err)
	}
	writes := w.writes.Take()
	got := &authv1beta1.Tenant{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: f.id}, got); err != nil {
		t.Fatal(err)
	}
	if writes["create CertificateSigningRequest"] != 1 || !got.Status.AuthParams.HasCertificate() || got.Status.Certificate == nil {
		t.Fatalf("the certificate issued beside the failed access is not saved: writes %v, status %+v", writes, got.Status)
	}
	if meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionAccessGranted) != nil ||
		meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady) {
		t.Errorf("conditions %+v: no access yet, not Ready", got.Status.Conditions)
	}
	serial := got.Status.Certificate.SerialNumber

	w.refuse = nil
	_, got, writes, evs := w.reconcile()
	if writes["create CertificateSigningRequest"] != 0 || got.Status.Certificate == nil || got.Status.Certificate.SerialNumber != serial {
		t.Errorf("the certificate was issued again: writes %v", writes)
	}
	if hasEvent(evs, "Warning", authv1beta1.ReasonStatusTampered) {
		t.Errorf("the saved certificate was taken for a tampered status: %v", evs)
	}
	if c := condition(t, got, authv1beta1.ConditionAccessGranted); c.Status != metav1.ConditionTrue {
		t.Errorf("AccessGranted is %s %s (%s)", c.Status, c.Reason, c.Message)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady) {
		t.Errorf("not Ready: %+v", got.Status.Conditions)
	}
}
