package integration

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
)

// TestSmokeCSRIssuedCertificateAuthenticates proves the floor every other test stands on:
// two control planes start in parallel, kube-controller-manager signs an approved CSR for
// an Ed25519 key, and the certificate authenticates as the requested user, who can do
// what RBAC grants and nothing else.
func TestSmokeCSRIssuedCertificateAuthenticates(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cps := testenv.New(t, "smoke-a", "smoke-b")
	t.Logf("two control planes ready in %s", time.Since(start))
	require.NotEqual(t, cps[0].URL, cps[1].URL)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cp := range cps {
		admin := kubernetes.NewForConfigOrDie(cp.Config)
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "smoke-user", Organization: []string{"smoke-group"}}}, priv)
		require.NoError(t, err)
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName:        certificatesv1.KubeAPIServerClientSignerName,
				ExpirationSeconds: ptr.To[int32](600),
				Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}
		csr, err = admin.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		require.NoError(t, err)
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Smoke", Message: "smoke test"})
		_, err = admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		require.NoError(t, err)

		var issued []byte
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, getErr := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
			if getErr != nil {
				return false, getErr
			}
			issued = got.Status.Certificate
			return len(issued) > 0, nil
		}), "kube-controller-manager did not sign the CSR")

		keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
		require.NoError(t, err)
		userCfg := &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA.CertPEM, CertData: issued,
			KeyData: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}}
		user := kubernetes.NewForConfigOrDie(userCfg)

		review, err := user.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "smoke-user", review.Status.UserInfo.Username)
		require.Contains(t, review.Status.UserInfo.Groups, "smoke-group")

		_, err = user.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "RBAC must deny what it does not grant, got %v", err)

		_, err = admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "smoke"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "smoke-user"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, listErr := user.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return listErr == nil, nil
		}), "the granted permission must work")
		_, err = user.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "secrets stay denied, got %v", err)
	}
}
