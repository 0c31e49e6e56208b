package handshake

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// credentialPKI is a provider CA and the keys of a consumer around a key rotation.
type credentialPKI struct {
	t                        *testing.T
	ca                       *x509.Certificate
	caKey                    crypto.Signer
	caPEM                    []byte
	current, previous, other crypto.Signer
}

func newCredentialPKI(t *testing.T) *credentialPKI {
	t.Helper()
	p := &credentialPKI{t: t}
	p.caKey, p.current, p.previous, p.other = credentialKey(t), credentialKey(t), credentialKey(t), credentialKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "provider-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, p.caKey.Public(), p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return p
}

func credentialKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// cert is a client certificate of the provider's CA for user cn and key, valid until
// notAfter.
func (p *credentialPKI) cert(cn string, key crypto.Signer, notAfter time.Time) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"cl-c"}},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// side is consumer cl-c, with its tenant record of provider cl-p pinning the CA, and objs.
func (p *credentialPKI) side(objs ...client.Object) (*Side, *lines) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	fp, err := authn.CAFingerprint(p.caPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cluster.UpdateTenantRecord(context.Background(), c, c, "liqo", "cl-p", true, func(r *cluster.TenantRecord) error {
		r.CAFingerprint = fp
		return nil
	}); err != nil {
		p.t.Fatal(err)
	}
	l := &lines{}
	return &Side{Scope: Local, Client: c, Namespace: "liqo", ClusterID: "cl-c", Report: l,
		keys: &cluster.KeySet{Current: p.current, Previous: p.previous}}, l
}

// TestCredentialIsOfTheIdentityItProves: a proof's credential is a certificate valid now,
// of the user it proves for, for a key this cluster holds (the previous one around a
// rotation too) and issued by the pinned CA (not only named beside it). Every other certificate of this cluster (the
// control plane's in a slice's Identity, a slice's in the control plane's) proves nothing
// of that identity; an expired one, or none, authorizes nothing.
func TestCredentialIsOfTheIdentityItProves(t *testing.T) {
	p := newCredentialPKI(t)
	now, later := time.Now(), time.Now().Add(time.Hour)
	slice := authn.SliceUserName("s1", "cl-c")
	foreign := newCredentialPKI(t)
	for _, tc := range []struct {
		name     string
		crt, ca  []byte
		user     string
		want     bool
		held     bool
		errorSay string
	}{
		{"the control plane's own", p.cert("cl-c", p.current, later), p.caPEM, "cl-c", true, true, ""},
		{"a slice's own", p.cert(slice, p.current, later), p.caPEM, slice, true, true, ""},
		{"the previous key around a rotation", p.cert(slice, p.previous, later), p.caPEM, slice, true, true, ""},
		{"the control plane's in a slice's Identity", p.cert("cl-c", p.current, later), p.caPEM, slice, false, true, `holds a certificate for user "cl-c", not "` + slice + `"`},
		{"a slice's in the control plane's Identity", p.cert(slice, p.current, later), p.caPEM, "cl-c", false, true, `holds a certificate for user "` + slice + `", not "cl-c"`},
		{"another key", p.cert("cl-c", p.other, later), p.caPEM, "cl-c", false, true, "another key"},
		{"another CA", foreign.cert("cl-c", p.current, later), foreign.caPEM, "cl-c", false, true, "is not the"},
		{"signed by another CA beside the pinned one", foreign.cert("cl-c", p.current, later), p.caPEM, "cl-c", false, true, "its CA did not issue"},
		{"a slice's, signed by another CA beside the pinned one", foreign.cert(slice, p.current, later), p.caPEM, slice, false, true, "its CA did not issue"},
		{"expired", p.cert("cl-c", p.current, now.Add(-time.Minute)), p.caPEM, "cl-c", false, false, ""},
		{"none", nil, p.caPEM, "cl-c", false, false, ""},
		{"not a certificate", []byte("garbage"), p.caPEM, "cl-c", false, true, "Identity x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := p.side()
			ap := &authv1beta1.AuthParams{SignedCRT: tc.crt, CA: tc.ca, APIServer: "https://127.0.0.1:6443"}
			cfg, _, held, err := s.credential(context.Background(), "Identity x", ap, tc.user, "cl-p", nil, now, true)
			if (cfg != nil) != tc.want || held != tc.held {
				t.Fatalf("credential: %v, held %v, error %v", cfg != nil, held, err)
			}
			if tc.errorSay == "" && err != nil || tc.errorSay != "" && (err == nil || !strings.Contains(err.Error(), tc.errorSay)) {
				t.Fatalf("error %v, want one saying %q", err, tc.errorSay)
			}
		})
	}
}

// TestSliceRevocationCredential: a slice's proof takes its Identity's certificate and the
// one its status holds, each once, passing over (and saying why) one of another user; with none to take,
// issued says whether one valid now was issued (its status's certificate information, or a
// certificate that did not check), and a slice issued nothing has nothing to revoke.
func TestSliceRevocationCredential(t *testing.T) {
	p := newCredentialPKI(t)
	later := time.Now().Add(time.Hour)
	user := authn.SliceUserName("s1", "cl-c")
	ns := wire.TenantNamespaceName("cl-p")
	own, other, older := p.cert(user, p.current, later), p.cert("cl-c", p.current, later), p.cert(user, p.previous, later)
	identity := func(crt []byte) *authv1beta1.Identity {
		return &authv1beta1.Identity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wire.SliceIdentityName("s1")},
			Spec: authv1beta1.IdentitySpec{AuthParams: authv1beta1.AuthParams{SignedCRT: crt, CA: p.caPEM, APIServer: "https://127.0.0.1:6443"}}}
	}
	slice := func(crt []byte, info bool) *authv1beta1.ResourceSlice {
		rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}}
		if crt != nil {
			rs.Status.AuthParams = &authv1beta1.AuthParams{SignedCRT: crt, CA: p.caPEM, APIServer: "https://127.0.0.1:6443"}
		}
		if info {
			rs.Status.Certificate = &authv1beta1.CertificateInfo{NotAfter: &metav1.Time{Time: later}}
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		objs   []client.Object
		want   int
		issued bool
		warns  string
	}{
		{"its Identity, the same as its status", []client.Object{identity(own), slice(own, true)}, 1, true, ""},
		{"no Identity: its status", []client.Object{slice(own, true)}, 1, true, ""},
		{"an Identity with no certificate: its status", []client.Object{identity(nil), slice(own, true)}, 1, true, ""},
		{"another user's in its Identity: its status", []client.Object{identity(other), slice(own, true)}, 1, true, `holds a certificate for user "cl-c"`},
		{"an older one in its Identity: both", []client.Object{identity(older), slice(own, true)}, 2, true, ""},
		{"none left, its status says one was issued", []client.Object{slice(nil, true)}, 0, true, ""},
		{"none left but another user's", []client.Object{identity(other), slice(nil, false)}, 0, true, "not taken to prove"},
		{"a slice issued nothing", []client.Object{slice(nil, false)}, 0, false, ""},
		{"no slice, no Identity", nil, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l := p.side(tc.objs...)
			creds, issued, _, err := SliceRevocationCredential(context.Background(), s, ns, "cl-p", "s1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(creds) != tc.want || issued != tc.issued {
				t.Fatalf("%d credentials, issued %v; said %q", len(creds), issued, *l)
			}
			said := strings.Join(*l, "\n")
			if tc.warns == "" && said != "" || !strings.Contains(said, tc.warns) {
				t.Fatalf("said %q, want %q", said, tc.warns)
			}
			if len(creds) > 0 && string(creds[len(creds)-1].CertData) != string(own) {
				t.Fatal("the slice's current certificate is not among the credentials")
			}
		})
	}
}

// TestLeftIn: the advice names the namespace where an access was left, in the order asked,
// and the protocol's for an access left cluster-wide.
func TestLeftIn(t *testing.T) {
	namespaces := []string{"liqo-tenant-cl-c", "moved"}
	in := func(ns string) stillAllowed { return stillAllowed{namespace: ns} }
	for _, tc := range []struct {
		left []stillAllowed
		want string
	}{
		{[]stillAllowed{in("moved")}, "moved"},
		{[]stillAllowed{in("moved"), in("liqo-tenant-cl-c")}, "liqo-tenant-cl-c"},
		{[]stillAllowed{in("")}, "liqo-tenant-cl-c"},
		{[]stillAllowed{in(`moved" in "x`)}, "liqo-tenant-cl-c"},
	} {
		if got := leftIn(tc.left, namespaces); got != tc.want {
			t.Errorf("leftIn(%v) = %q, want %q", tc.left, got, tc.want)
		}
	}
}
