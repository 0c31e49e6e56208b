package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority: the client and signing CA of one control plane.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA creates a certificate authority that no control plane trusts: a foreign CA, for
// tests of what a cluster must refuse.
func NewCA(name string) (*CA, error) { return newCA(name) }

func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: name + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemEncode("CERTIFICATE", der)}, nil
}

func (ca *CA) write(dir string) error {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ca.key"), pemEncode("PRIVATE KEY", der), 0o600)
}

// Issue signs a certificate for a fresh ECDSA key and returns both in PEM. A certificate
// with IP or DNS names is a serving certificate; otherwise it is a client certificate for
// user cn in the given groups.
func (ca *CA) Issue(cn string, groups []string, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if len(ips)+len(dns) > 0 {
		usage = x509.ExtKeyUsageServerAuth
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: ips, DNSNames: dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemEncode("CERTIFICATE", der), pemEncode("PRIVATE KEY", keyDER), nil
}

func randomSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writePKI creates the CA, the API server serving certificate, the service-account
// signing key and the admin client certificate in dir.
func writePKI(dir, name string, host net.IP) (*CA, error) {
	ca, err := newCA(name)
	if err != nil {
		return nil, err
	}
	if writeErr := ca.write(dir); writeErr != nil {
		return nil, writeErr
	}
	crt, key, err := ca.Issue("kube-apiserver", nil, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1), net.IPv6loopback, host},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, _ := x509.MarshalPKCS8PrivateKey(saKey)
	saPub, _ := x509.MarshalPKIXPublicKey(saKey.Public())
	files := map[string][]byte{
		"apiserver.crt": crt, "apiserver.key": key,
		"sa.key": pemEncode("PRIVATE KEY", saDER), "sa.pub": pemEncode("PUBLIC KEY", saPub),
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
