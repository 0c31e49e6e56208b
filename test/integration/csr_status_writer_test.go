package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestCSRStatusWriterCannotPublishACertificate acts as a principal that may
// create CertificateSigningRequests and write their status (certificatesigningrequests
// create/get/list/watch, certificatesigningrequests/status update), without `sign` on any
// signer. It watches the provider's CSRs during a handshake and, on every event of a CSR
// for the consumer that carries no certificate yet (created, approved), writes a
// certificate of its own CA for the very key and subject the CSR asks, racing the signer
// and the manager's new wait for the signer (issuer.awaitSigner reads the CSR from the
// cache). The provider must publish only a certificate its cluster CA issued.
func TestCSRStatusWriterCannotPublishACertificate(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startManager(t, provider, "--consumer=false")
	writer := principal(t, provider, "csr-status-writer", "",
		rule("certificates.k8s.io", "certificatesigningrequests", "get", "list", "watch", "create"),
		rule("certificates.k8s.io", "certificatesigningrequests/status", "get", "update", "patch"))
	foreign, err := testenv.NewCA("attacker")
	require.NoError(t, err)
	forge := func(csr *certificatesv1.CertificateSigningRequest) []byte {
		c := forgeCertificateFor(foreign, csr)
		require.NotNil(t, c)
		return c
	}

	// Deterministic part: a request of the kube-apiserver-client signer this principal
	// made itself; writing its certificate needs `sign` on that signer.
	a := newAttacker(t, consumer.id)
	own := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-status-writer-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: a.csr(t), SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To(int32(3600))}}
	require.NoError(t, writer.Create(ctx, own))
	own.Status.Certificate = forge(own)
	err = writer.Status().Update(ctx, own)
	t.Logf("setting the certificate of its own pending request: %v", err)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "a CSR status writer set a certificate: %v", err)

	// The race during a real handshake.
	var mu sync.Mutex
	var attempts, accepted int
	w, err := writer.Watch(ctx, &certificatesv1.CertificateSigningRequestList{}, client.MatchingLabels{wire.RemoteClusterIDLabel: consumer.id})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok || ev.Type == watch.Deleted || len(csr.Status.Certificate) > 0 {
				continue
			}
			csr.Status.Certificate = forgeCertificateFor(foreign, csr)
			if csr.Status.Certificate == nil {
				continue
			}
			updateErr := writer.Status().Update(context.Background(), csr)
			mu.Lock()
			attempts++
			if updateErr == nil {
				accepted++
			}
			mu.Unlock()
			t.Logf("forging the certificate of %s (%s): %v", csr.Name, ev.Type, updateErr)
		}
	}()
	_, errOut, cliErr := runCLI(t, pairArgs("authenticate", consumer, provider)...)
	t.Logf("authenticate: %v\n%s", cliErr, errOut)
	w.Stop()
	<-done

	var tn authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}, &tn))
	require.NotNil(t, tn.Status.AuthParams)
	cert, err := authn.ParseCertificate(tn.Status.AuthParams.SignedCRT)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(provider.cp.CA.Cert)
	_, verr := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, verr, "the provider published a certificate its cluster CA did not issue")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("forgery attempts %d, accepted by the API server %d", attempts, accepted)
	assert.Positive(t, attempts)
	assert.Zero(t, accepted, "the API server let a CSR status writer without sign set a certificate")
}

// forgeCertificateFor signs, with ca, a client certificate for the key and subject csr asks (nil
// when its request does not parse): what a signer would issue, from the wrong CA.
func forgeCertificateFor(ca *testenv.CA, csr *certificatesv1.CertificateSigningRequest) []byte {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
