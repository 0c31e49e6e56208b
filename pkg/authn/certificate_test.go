package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: mustPEM(t, PEMTypeCertificate, der)}
}

func (ca *testCA) issue(t testing.TB, pub crypto.PublicKey, cn string, usage x509.ExtKeyUsage, notAfter time.Time) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{wire.UserGroup}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	require.NoError(t, err)
	return mustPEM(t, PEMTypeCertificate, der)
}

func TestVerifyCertificate(t *testing.T) {
	ca, foreign := newTestCA(t), newTestCA(t)
	key, other := mustKey(t, Ed25519), mustKey(t, Ed25519)
	later := time.Now().Add(time.Hour)
	good := ca.issue(t, key.Public(), "cl-consumer", x509.ExtKeyUsageClientAuth, later)
	cases := []struct {
		name   string
		cert   []byte
		ca     []byte
		reason Reason
	}{
		{"valid", good, ca.pem, ""},
		{"valid with bundle", good, append(append([]byte{}, foreign.pem...), ca.pem...), ""},
		{"other key", ca.issue(t, other.Public(), "cl-consumer", x509.ExtKeyUsageClientAuth, later), ca.pem, ReasonCertificateKeyMismatch},
		{"foreign CA", foreign.issue(t, key.Public(), "cl-consumer", x509.ExtKeyUsageClientAuth, later), ca.pem, ReasonCertificateNotTrusted},
		{"other cluster", ca.issue(t, key.Public(), "cl-other", x509.ExtKeyUsageClientAuth, later), ca.pem, ReasonCertificateSubject},
		{"server usage", ca.issue(t, key.Public(), "cl-consumer", x509.ExtKeyUsageServerAuth, later), ca.pem, ReasonCertificateNotTrusted},
		{"expired", ca.issue(t, key.Public(), "cl-consumer", x509.ExtKeyUsageClientAuth, time.Now().Add(-time.Second)), ca.pem, ReasonCertificateExpired},
		{"garbage cert", []byte("x"), ca.pem, ReasonCertificateInvalid},
		{"two certs", append(append([]byte{}, good...), good...), ca.pem, ReasonCertificateInvalid},
		{"empty CA", good, nil, ReasonCAInvalid},
		{"CA is a key", good, mustPEM(t, PEMTypePrivateKey, []byte{1}), ReasonCAInvalid},
		{"CA bad der", good, mustPEM(t, PEMTypeCertificate, []byte{1}), ReasonCAInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyCertificate(tc.cert, tc.ca, key.Public(), "cl-consumer", time.Now())
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			assert.Equal(t, tc.reason, ReasonOf(err), "%v", err)
		})
	}
}

func TestCAFingerprint(t *testing.T) {
	ca := newTestCA(t)
	fp, err := CAFingerprint(ca.pem)
	require.NoError(t, err)
	assert.Len(t, fp, len("sha256:")+64)
	fp2, _ := CAFingerprint(newTestCA(t).pem)
	assert.NotEqual(t, fp, fp2)
	_, err = CAFingerprint([]byte("nope"))
	assert.Equal(t, ReasonCAInvalid, ReasonOf(err))
}

func TestForgeAndReadKubeconfig(t *testing.T) {
	ca := newTestCA(t)
	key := mustKey(t, Ed25519)
	cert := ca.issue(t, key.Public(), "cl-consumer", x509.ExtKeyUsageClientAuth, time.Now().Add(time.Hour))
	p := KubeconfigParams{ClusterName: "cl-provider", User: "cl-consumer", Server: "https://127.0.0.1:6443", CA: ca.pem,
		ProxyURL: "socks5://proxy:1080", CertPEM: cert, Key: key, Namespace: "liqo-tenant-cl-consumer"}
	data, err := ForgeKubeconfig(p, time.Now())
	require.NoError(t, err)
	info, err := ReadKubeconfig(data)
	require.NoError(t, err)
	assert.Equal(t, p.Server, info.Server)
	assert.Equal(t, p.Namespace, info.Namespace)
	assert.Equal(t, cert, info.CertPEM)
	assert.Equal(t, ca.pem, info.CA)

	refusals := map[string]struct {
		mut    func(*KubeconfigParams)
		reason Reason
	}{
		"http server":    {func(p *KubeconfigParams) { p.Server = "http://127.0.0.1:6443" }, ReasonServerURLInvalid},
		"credentials":    {func(p *KubeconfigParams) { p.Server = "https://u:p@host" }, ReasonServerURLInvalid},
		"no host":        {func(p *KubeconfigParams) { p.Server = "https://" }, ReasonServerURLInvalid},
		"query":          {func(p *KubeconfigParams) { p.Server = "https://h/?x=1" }, ReasonServerURLInvalid},
		"bad proxy":      {func(p *KubeconfigParams) { p.ProxyURL = "ftp://proxy" }, ReasonProxyURLInvalid},
		"other key":      {func(p *KubeconfigParams) { p.Key = mustKey(t, Ed25519) }, ReasonCertificateKeyMismatch},
		"foreign CA":     {func(p *KubeconfigParams) { p.CA = newTestCA(t).pem }, ReasonCertificateNotTrusted},
		"other user":     {func(p *KubeconfigParams) { p.User = "cl-x" }, ReasonCertificateSubject},
		"not a cert":     {func(p *KubeconfigParams) { p.CertPEM = []byte("x") }, ReasonCertificateInvalid},
		"empty CA":       {func(p *KubeconfigParams) { p.CA = nil }, ReasonCAInvalid},
		"relative proxy": {func(p *KubeconfigParams) { p.ProxyURL = "proxy:80" }, ReasonProxyURLInvalid},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			q := p
			tc.mut(&q)
			_, err := ForgeKubeconfig(q, time.Now())
			assert.Equal(t, tc.reason, ReasonOf(err), "%v", err)
		})
	}
	assert.Equal(t, p.ProxyURL, info.ProxyURL)
	assert.NotEmpty(t, info.KeyPEM)
	for name, tamper := range map[string]func(*clientcmdapi.Config){
		"exec plugin": func(c *clientcmdapi.Config) {
			c.AuthInfos["cl-consumer"].Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh"}
		},
		"auth provider": func(c *clientcmdapi.Config) {
			c.AuthInfos["cl-consumer"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		},
		"token":           func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].Token = "t" },
		"token file":      func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].TokenFile = "/var/run/secrets/token" },
		"basic auth":      func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].Username = "admin" },
		"cert file":       func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].ClientCertificate = "/etc/cert" },
		"key file":        func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].ClientKey = "/etc/key" },
		"impersonation":   func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].Impersonate = "system:admin" },
		"impersonate UID": func(c *clientcmdapi.Config) { c.AuthInfos["cl-consumer"].ImpersonateUID = "1" },
		"CA file":         func(c *clientcmdapi.Config) { c.Clusters["cl-provider"].CertificateAuthority = "/etc/ca" },
		"insecure":        func(c *clientcmdapi.Config) { c.Clusters["cl-provider"].InsecureSkipTLSVerify = true },
		"server name":     func(c *clientcmdapi.Config) { c.Clusters["cl-provider"].TLSServerName = "evil" },
	} {
		t.Run("read with "+name, func(t *testing.T) {
			cfg, err := clientcmd.Load(data)
			require.NoError(t, err)
			tamper(cfg)
			out, err := clientcmd.Write(*cfg)
			require.NoError(t, err)
			_, err = ReadKubeconfig(out)
			assert.Equal(t, ReasonKubeconfigForeignCredentials, ReasonOf(err), "%v", err)
		})
	}
	for name, in := range map[string]string{"garbage": "{{", "no context": "apiVersion: v1\nkind: Config\n", "no cert": "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: {server: https://x}}]\nusers: [{name: u, user: {}}]\n"} {
		t.Run("read "+name, func(t *testing.T) {
			_, err := ReadKubeconfig([]byte(in))
			assert.Equal(t, ReasonKubeconfigInvalid, ReasonOf(err), "%v", err)
		})
	}
}

func TestGoldenFiles(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the golden files")
	}
	sig, err := SignNonce(fixedKey(), fixedNonce())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("testdata/golden-signature.b64", []byte(b64(sig)+"\n"), 0o644))
	csr, err := ForgeCSR(fixedKey(), "cl-consumer")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("testdata/golden-csr.pem", csr, 0o644))
	fp, _ := Fingerprint(fixedKey().Public())
	require.NoError(t, os.WriteFile("testdata/golden-fingerprint.txt", []byte(fp+"\n"), 0o644))
	assert.True(t, true)
}
