package consumerslice

import (
	"context"
	"crypto"
	"crypto/x509"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
)

// issue is a client certificate of ca for pub and user cn, and its parsed form.
func issue(t *testing.T, ca *testCA, pub crypto.PublicKey, cn string) ([]byte, *x509.Certificate) {
	t.Helper()
	crt := ca.leaf(pub, cn, consumerID)
	cert, err := authn.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}
	return crt, cert
}

// TestAnswerCertificateIsChecked: the certificate in the status of the provider's copy is
// taken into the local slice (and its Identity, and the proof of its deletion) only when
// the CA pinned for the provider issued it to the slice's user for this cluster's key;
// otherwise the slice keeps the one it had, and a Warning says why. Whoever may write the
// copy's status on the provider writes that answer.
func TestAnswerCertificateIsChecked(t *testing.T) {
	pinned, other := newTestCA(), newTestCA()
	user := authn.SliceUserName(sliceName, consumerID)
	otherKey, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		ca  *testCA
		pub func(e *env) crypto.PublicKey
		cn  string
		// caInStatus: the CA the answer names beside the certificate (default: ca's).
		caInStatus *testCA
	}
	own := func(e *env) crypto.PublicKey { return e.key.Public() }
	for _, tc := range []struct {
		name      string
		had       bool // the local slice holds a certificate of the pinned CA already
		answer    answer
		wantTaken bool
	}{
		{name: "issued by the pinned CA", answer: answer{ca: pinned, pub: own, cn: user}, wantTaken: true},
		{name: "a renewal by the pinned CA", had: true, answer: answer{ca: pinned, pub: own, cn: user}, wantTaken: true},
		{name: "another CA, named beside it", had: true, answer: answer{ca: other, pub: own, cn: user}},
		{name: "another CA, the pinned one named beside it", had: true, answer: answer{ca: other, pub: own, cn: user, caInStatus: pinned}},
		{name: "another CA, nothing held before", answer: answer{ca: other, pub: own, cn: user}},
		{name: "the control plane's user", had: true, answer: answer{ca: pinned, pub: own, cn: consumerID}},
		{name: "another key", had: true, answer: answer{ca: pinned, pub: func(*env) crypto.PublicKey { return otherKey.Public() }, cn: user}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := request(sliceName, time.Second)
			cpIdentity := &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: wire.IdentityName(providerID)},
				Spec: authv1beta1.IdentitySpec{ClusterID: providerID, Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To(remoteNS),
					AuthParams: authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: pinned.pem}}}
			e := setup(t, true, rs, cpIdentity)
			fp := must(authn.CAFingerprint(pinned.pem))
			if err := cluster.UpdateTenantRecord(context.Background(), e.c, e.c, liqoNS, providerID, false, func(r *cluster.TenantRecord) error {
				r.CAFingerprint = fp
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), rs); err != nil {
				t.Fatal(err)
			}
			var had []byte
			if tc.had {
				crt, cert := issue(t, pinned, e.key.Public(), user)
				had = crt
				rs.Status.Conditions = decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceAccepted)
				rs.Status.AuthParams = &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: pinned.pem, SignedCRT: crt}
				rs.Status.Certificate = issuer.CertificateInfo(cert, 10*time.Minute)
				if err := e.c.Status().Update(context.Background(), rs); err != nil {
					t.Fatal(err)
				}
			}
			crt, cert := issue(t, tc.answer.ca, tc.answer.pub(e), tc.answer.cn)
			caInStatus := tc.answer.ca
			if tc.answer.caInStatus != nil {
				caInStatus = tc.answer.caInStatus
			}
			cp := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: sliceName, Labels: copyLabels(consumerID)}, Spec: rs.Spec,
				Status: authv1beta1.ResourceSliceStatus{Conditions: decided(authv1beta1.ResourceSliceAccepted, authv1beta1.ResourceSliceAccepted),
					AuthParams:  &authv1beta1.AuthParams{APIServer: "https://provider.example:6443", CA: caInStatus.pem, SignedCRT: crt},
					Certificate: issuer.CertificateInfo(cert, 10*time.Minute)}}
			remote, _ := provider(t, nil, cp)
			ks, err := e.r.Keys.Keys(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.r.request(context.Background(), rs, providerID, remote, remoteNS, ks); err != nil {
				t.Fatal(err)
			}
			got := &authv1beta1.ResourceSlice{}
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rs), got); err != nil {
				t.Fatal(err)
			}
			var gotCRT []byte
			if got.Status.AuthParams != nil {
				gotCRT = got.Status.AuthParams.SignedCRT
			}
			id := &authv1beta1.Identity{}
			idErr := e.c.Get(context.Background(), client.ObjectKey{Namespace: tenantNS, Name: wire.SliceIdentityName(sliceName)}, id)
			switch {
			case tc.wantTaken:
				if string(gotCRT) != string(crt) || idErr != nil || string(id.Spec.AuthParams.SignedCRT) != string(crt) {
					t.Fatalf("the answer's certificate is not taken: status holds %d bytes, Identity %v", len(gotCRT), idErr)
				}
				wantEvents(t, e.events())
			default:
				if string(gotCRT) != string(had) {
					t.Fatalf("the local slice holds %q; want the certificate it had (%q)", gotCRT, had)
				}
				if !tc.had && got.Status.Certificate != nil {
					t.Fatalf("the local slice took the answer's certificate info: %+v", got.Status.Certificate)
				}
				if idErr == nil && string(id.Spec.AuthParams.SignedCRT) == string(crt) {
					t.Fatal("the refused certificate reached the slice's Identity")
				}
				wantEvents(t, e.events(), "Warning "+authv1beta1.ReasonSliceCertificateRefused)
			}
		})
	}
}
