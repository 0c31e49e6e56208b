package providerslice

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// issuedFor is a certificate of the test CA for pub, subject CN=cn, O=orgs.
func issuedFor(t *testing.T, pub crypto.PublicKey, cn string, orgs ...string) ([]byte, *x509.Certificate, []byte) {
	t.Helper()
	caPub, caKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0xabc), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// TestSliceFollowsItsCSR: the slice's RoleBinding names the subject of its accepted CSR
// (Group of its key group for a key-bound CSR, User otherwise); a slice holding a
// certificate that is not for its CSR's key or form (the consumer switched its key) gets
// a certificate for the CSR at once, not at renewal, and is bound to the new subject; a
// Tenant sealed by any key of the provider's set is accepted, one sealed by a key of no
// set is not.
func TestSliceFollowsItsCSR(t *testing.T) {
	user := authn.SliceUserName(testSlice, testID)
	for _, tc := range []struct {
		name string
		// keyBound: the slice's CSR is key-bound; published: the slice's status holds a
		// certificate (valid, not due for renewal) of this key (nil: none) in this form.
		keyBound          bool
		published         func(k keys) crypto.Signer
		publishedKeyBound bool
		// otherCA: the published certificate's CA is not the one the provider publishes
		// (a status writer's).
		otherCA            bool
		sealedBy           func(k keys, previous crypto.Signer) crypto.Signer
		wantIssue, wantSub bool
	}{
		{name: "Liqo's form: bound as User", wantIssue: true, wantSub: true},
		{name: "key-bound: bound as its key group", keyBound: true, wantIssue: true, wantSub: true},
		{name: "certificate of an old key: issued for the new one at once", keyBound: true, published: func(keys) crypto.Signer { return otherKey() }, wantIssue: true, wantSub: true},
		{name: "certificate of the key in Liqo's form, CSR key-bound: issued at once", keyBound: true, published: func(k keys) crypto.Signer { return k.consumer }, wantIssue: true, wantSub: true},
		{name: "certificate for the CSR: not issued again before renewal", keyBound: true, published: func(k keys) crypto.Signer { return k.consumer }, publishedKeyBound: true, wantSub: true},
		{name: "certificate for the CSR by another CA: issued again at once", keyBound: true, published: func(k keys) crypto.Signer { return k.consumer }, publishedKeyBound: true, otherCA: true, wantIssue: true, wantSub: true},
		{name: "Tenant sealed by the provider's previous key", keyBound: true, sealedBy: func(_ keys, previous crypto.Signer) crypto.Signer { return previous }, wantIssue: true, wantSub: true},
		{name: "Tenant sealed by a key of no set", sealedBy: func(keys, crypto.Signer) crypto.Signer { return otherKey() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, func(*cluster.TenantRecord) {})
			previous := otherKey()
			e.r.Keys = cluster.FixedKeys{Current: e.k.provider, Previous: previous}
			sealKeys := e.k
			if tc.sealedBy != nil {
				sealKeys.provider = tc.sealedBy(e.k, previous)
			}
			tn, rs := acceptedTenant(t, sealKeys), providerCopy(t, e.k, testSlice)
			if tc.keyBound {
				rs.Spec.CSR = must(authn.ForgeKeyBoundCSRFor(e.k.consumer, user, testID))
			}
			if tc.published != nil {
				orgs := []string{testID}
				if tc.publishedKeyBound {
					orgs = append(orgs, must(authn.KeyGroup(user, tc.published(e.k).Public())))
				}
				crt, cert, ca := issuedFor(t, tc.published(e.k).Public(), user, orgs...)
				e.r.Options.Tenant.CA = ca
				if tc.otherCA {
					_, _, e.r.Options.Tenant.CA = issuedFor(t, tc.published(e.k).Public(), user, orgs...)
				}
				rs.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: ca, SignedCRT: crt}
				rs.Status.Certificate = issuer.CertificateInfo(cert, 10*time.Minute)
			}
			for _, o := range []client.Object{tn, rs} {
				if err := e.c.Create(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			if tc.published != nil {
				if err := e.c.Status().Update(context.Background(), rs); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := e.reconcile(t, testSlice); err != nil {
				t.Fatal(err)
			}
			var csrs certificatesv1.CertificateSigningRequestList
			if err := e.c.List(context.Background(), &csrs); err != nil {
				t.Fatal(err)
			}
			if issued := len(csrs.Items) == 1 && string(csrs.Items[0].Spec.Request) == string(rs.Spec.CSR); issued != tc.wantIssue || len(csrs.Items) > 1 {
				t.Fatalf("%d CSRs (for the slice's: %t); want one for the slice's CSR: %t", len(csrs.Items), issued, tc.wantIssue)
			}
			var rb rbacv1.RoleBinding
			err := e.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: wire.SliceAccessName(testSlice)}, &rb)
			if !tc.wantSub {
				if err == nil {
					t.Fatalf("a slice of a Tenant sealed by a key of no set is bound: %+v", rb.Subjects)
				}
				return
			}
			want := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}
			if tc.keyBound {
				want = rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: must(authn.KeyGroup(user, e.k.consumer.Public()))}
			}
			if err != nil || len(rb.Subjects) != 1 || rb.Subjects[0] != want {
				t.Fatalf("RoleBinding subjects %+v (%v); want %+v", rb.Subjects, err, want)
			}
		})
	}
}

// TestRebindsWhenTheCSRBecomesKeyBound: a slice bound as its user in Liqo's form whose CSR
// becomes key-bound is bound as its key group instead, and the user is named no more.
func TestRebindsWhenTheCSRBecomesKeyBound(t *testing.T) {
	e := setup(t, func(*cluster.TenantRecord) {})
	user := authn.SliceUserName(testSlice, testID)
	tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
	for _, o := range []client.Object{tn, rs} {
		if err := e.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.reconcile(t, testSlice); err != nil {
		t.Fatal(err)
	}
	got := &authv1beta1.ResourceSlice{}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.CSR = must(authn.ForgeKeyBoundCSRFor(e.k.consumer, user, testID))
	if err := e.c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.reconcile(t, testSlice); err != nil {
		t.Fatal(err)
	}
	var rb rbacv1.RoleBinding
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: wire.SliceAccessName(testSlice)}, &rb); err != nil {
		t.Fatal(err)
	}
	want := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: must(authn.KeyGroup(user, e.k.consumer.Public()))}
	if len(rb.Subjects) != 1 || rb.Subjects[0] != want {
		t.Fatalf("RoleBinding subjects %+v; want only %+v", rb.Subjects, want)
	}
	if !metav1.IsControlledBy(&rb, got) {
		t.Fatal("the new RoleBinding is not controlled by the slice")
	}
}

// TestCheckIssuedAcceptsTheKeyBoundForm: the issued certificate is checked against the
// CSR: O exactly [org] for Liqo's form, org and the CSR's key group for a key-bound one,
// nothing else.
func TestCheckIssuedAcceptsTheKeyBoundForm(t *testing.T) {
	k := newKeys(t)
	user := authn.SliceUserName(testSlice, testID)
	group := must(authn.KeyGroup(user, k.consumer.Public()))
	liqo, bound := must(authn.ForgeCSRFor(k.consumer, user, testID)), must(authn.ForgeKeyBoundCSRFor(k.consumer, user, testID))
	for _, tc := range []struct {
		name string
		csr  []byte
		orgs []string
		ok   bool
	}{
		{name: "Liqo's form", csr: liqo, orgs: []string{testID}, ok: true},
		{name: "key-bound", csr: bound, orgs: []string{testID, group}, ok: true},
		{name: "key-bound, other order", csr: bound, orgs: []string{group, testID}, ok: true},
		{name: "key group the CSR did not ask", csr: liqo, orgs: []string{testID, group}},
		{name: "key group missing", csr: bound, orgs: []string{testID}},
		{name: "another group", csr: bound, orgs: []string{testID, "system:masters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cert, _ := issuedFor(t, k.consumer.Public(), user, tc.orgs...)
			if err := checkIssued(cert, tc.csr, user, testID); (err == nil) != tc.ok {
				t.Fatalf("checkIssued = %v; want accepted: %t", err, tc.ok)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestKeyGroupHoldingPermissionsIsIssuedNothing: the check that a slice's identity holds no
// permission this provider did not grant covers its key group: a binding of someone else
// naming the group of a key-bound slice's CSR stops the issuance.
func TestKeyGroupHoldingPermissionsIsIssuedNothing(t *testing.T) {
	e := setup(t, func(*cluster.TenantRecord) {})
	user := authn.SliceUserName(testSlice, testID)
	group := must(authn.KeyGroup(user, e.k.consumer.Public()))
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "planted"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}}
	tn, rs := acceptedTenant(t, e.k), providerCopy(t, e.k, testSlice)
	rs.Spec.CSR = must(authn.ForgeKeyBoundCSRFor(e.k.consumer, user, testID))
	for _, o := range []client.Object{crb, tn, rs} {
		if err := e.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.reconcile(t, testSlice); err != nil {
		t.Fatal(err)
	}
	var csrs certificatesv1.CertificateSigningRequestList
	if err := e.c.List(context.Background(), &csrs); err != nil || len(csrs.Items) != 0 {
		t.Fatalf("%d CSRs (%v); want none", len(csrs.Items), err)
	}
	if evs := e.events(); !slices.ContainsFunc(evs, func(s string) bool {
		return strings.HasPrefix(s, "Warning "+authv1beta1.ReasonClusterIDHasPermissions) && strings.Contains(s, "planted")
	}) {
		t.Fatalf("events %q; want a Warning %s naming the binding", evs, authv1beta1.ReasonClusterIDHasPermissions)
	}
}
