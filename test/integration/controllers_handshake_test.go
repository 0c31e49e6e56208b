package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// objectHandshake performs the protocol with objects only, as a declarative user would:
// an empty nonce Secret on the provider, a signed-nonce Secret on the consumer, a Tenant
// on the provider, an Identity on the consumer. It returns the consumer's kubeconfig.
func objectHandshake(t *testing.T, provider, consumer *site) []byte {
	t.Helper()
	ctx := context.Background()
	pTN := ensureTN(t, provider.client, consumer.id)
	cTN := ensureTN(t, consumer.client, provider.id)

	require.NoError(t, provider.client.Create(ctx, secret(pTN, wire.NonceSecretName,
		map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: consumer.id}, nil)))
	var nonce string
	eventually(t, 10*time.Second, "the provider fills the nonce", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.NonceSecretName}, &s)
		nonce = string(s.Data[wire.NonceField])
		return nonce != "" && s.Annotations[wire.NonceIssuedAtAnnotation] != "", err
	})
	require.NoError(t, authn.CheckNonce(nonce))

	require.NoError(t, consumer.client.Create(ctx, secret(cTN, wire.SignedNonceSecretName,
		map[string]string{wire.SignedNonceLabel: "true", wire.RemoteClusterIDLabel: provider.id},
		map[string][]byte{wire.NonceField: []byte(nonce)})))
	var signature []byte
	eventually(t, 10*time.Second, "the consumer signs the nonce", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SignedNonceSecretName}, &s)
		signature = s.Data[wire.SignedNonceField]
		return len(signature) > 0, err
	})

	key, err := cluster.GetClusterKey(ctx, consumer.client, wire.DefaultLiqoNamespace)
	require.NoError(t, err)
	require.NoError(t, authn.VerifyNonceSignature(key.Public(), nonce, signature))
	pub, err := authn.MarshalPublicKey(key.Public())
	require.NoError(t, err)
	csr, err := authn.ForgeCSR(key, consumer.id)
	require.NoError(t, err)
	tn := &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: consumer.id, Namespace: pTN, Labels: map[string]string{wire.RemoteClusterIDLabel: consumer.id}},
		Spec:       authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(consumer.id), PublicKey: pub, CSR: csr, Signature: signature},
	}
	require.NoError(t, provider.client.Create(ctx, tn))
	eventually(t, 20*time.Second, "the provider fills the Tenant status", func(ctx context.Context) (bool, error) {
		err := provider.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)
		return meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady), err
	})
	require.NotNil(t, tn.Status.AuthParams)
	require.Equal(t, pTN, tn.Status.TenantNamespace)

	id := &authv1beta1.Identity{
		ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName(provider.id), Namespace: cTN, Labels: map[string]string{wire.RemoteClusterIDLabel: provider.id}},
		Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(provider.id), Type: authv1beta1.ControlPlaneIdentityType,
			AuthParams: *tn.Status.AuthParams, Namespace: ptr.To(pTN)},
	}
	require.NoError(t, consumer.client.Create(ctx, id))
	eventually(t, 10*time.Second, "the consumer writes the kubeconfig", func(ctx context.Context) (bool, error) {
		err := consumer.client.Get(ctx, client.ObjectKeyFromObject(id), id)
		return id.Status.KubeconfigSecretRef != nil, err
	})
	var kc corev1.Secret
	require.NoError(t, consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: id.Status.KubeconfigSecretRef.Name}, &kc))
	assert.Equal(t, wire.KubeconfigSecretName(id.Name), kc.Name)
	assert.Equal(t, provider.id, kc.Labels[wire.RemoteClusterIDLabel])
	assert.Equal(t, "ControlPlane", kc.Labels[wire.IdentityTypeLabel])
	assert.Equal(t, pTN, kc.Annotations[wire.RemoteTenantNamespaceAnnotation])
	require.Equal(t, id.UID, metav1.GetControllerOf(&kc).UID)
	return kc.Data[wire.KubeconfigField]
}

func TestControllersFullHandshake(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "provider", "consumer")
	sites := installSites(t, cps, "cl-provider", "cl-consumer")
	provider, consumer := sites[0], sites[1]
	startControllers(t, provider, authmanager.Provider)
	startControllers(t, consumer, authmanager.Consumer)
	ctx := context.Background()

	kubeconfig := objectHandshake(t, provider, consumer)
	pTN := wire.TenantNamespaceName(consumer.id)

	// The nonce was consumed (kept, and recorded where the tenant cannot write) and no CSR
	// object is left behind.
	var s corev1.Secret
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.NonceSecretName}, &s))
	requireNonceConsumed(t, provider.client, consumer.id, &s)
	eventually(t, 10*time.Second, "the CSR objects are cleaned up", func(ctx context.Context) (bool, error) {
		var csrs certificatesv1.CertificateSigningRequestList
		err := provider.client.List(ctx, &csrs)
		return len(csrs.Items) == 0, err
	})
	var tn authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &tn))
	require.NotNil(t, tn.Status.Certificate)
	key, _ := cluster.GetClusterKey(ctx, consumer.client, wire.DefaultLiqoNamespace)
	fp, _ := authn.Fingerprint(key.Public())
	assert.Equal(t, fp, tn.Status.AcceptedKeyFingerprint)
	assert.Equal(t, authv1beta1.TenantConditionActive, tn.Spec.TenantCondition, "defaulted by the CRD")
	assert.WithinDuration(t, time.Now().Add(30*24*time.Hour), tn.Status.Certificate.NotAfter.Time, 10*time.Minute, "explicit certificate lifetime")

	// The identity can do exactly what the control-plane role grants, and nothing else.
	assertTenantAccess(t, provider, consumer, kubeconfig)
}

// assertTenantAccess checks, with real requests made with the issued kubeconfig, what the
// consumer may and may not do on the provider.
func assertTenantAccess(t *testing.T, _, consumer *site, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	pTN := wire.TenantNamespaceName(consumer.id)
	user := newClient(t, restConfigFromKubeconfig(t, kubeconfig))
	rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "slice", Namespace: pTN}}
	eventually(t, 10*time.Second, "the consumer may create ResourceSlices in its tenant namespace", func(ctx context.Context) (bool, error) {
		err := user.Create(ctx, rs)
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
	require.NoError(t, user.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(pTN)))
	var own authv1beta1.Tenant
	require.NoError(t, user.Get(ctx, client.ObjectKey{Namespace: pTN, Name: consumer.id}, &own), "it may read its own Tenant")
	require.NoError(t, user.Delete(ctx, own.DeepCopy(), client.DryRunAll), "it may delete its own Tenant (leaving is its own right), tried as a dry run")

	forbidden := map[string]error{
		"read secrets in its namespace":      user.List(ctx, &corev1.SecretList{}, client.InNamespace(pTN)),
		"read the nonce":                     user.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.NonceSecretName}, &corev1.Secret{}),
		"list slices elsewhere":              user.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace("default")),
		"list slices cluster-wide":           user.List(ctx, &authv1beta1.ResourceSliceList{}),
		"update its Tenant":                  user.Update(ctx, own.DeepCopy()),
		"write its Tenant status":            user.Status().Update(ctx, own.DeepCopy()),
		"write ResourceSlice status":         user.Status().Update(ctx, rs.DeepCopy()),
		"list Tenants":                       user.List(ctx, &authv1beta1.TenantList{}, client.InNamespace(pTN)),
		"create a RoleBinding":               user.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: pTN}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: consumer.id}}}),
		"create CSRs":                        user.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientSignerName, Request: []byte("x"), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}),
		"list namespaces":                    user.List(ctx, &corev1.NamespaceList{}),
		"create pods in its namespace":       user.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: pTN}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}),
		"read the provider's cluster key":    user.Get(ctx, client.ObjectKey{Namespace: wire.DefaultLiqoNamespace, Name: wire.KeysSecretName}, &corev1.Secret{}),
		"read configmaps in liqo namespace":  user.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(wire.DefaultLiqoNamespace)),
		"escalate by editing its own Role":   user.Update(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantReaderName, Namespace: pTN}}),
		"read its RoleBinding":               user.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.ControlPlaneBindingName}, &rbacv1.RoleBinding{}),
		"impersonate via CSR approval":       user.SubResource("approval").Update(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "x"}}),
		"create ResourceSlices in default":   user.Create(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"}}),
		"list identities":                    user.List(ctx, &authv1beta1.IdentityList{}, client.InNamespace(pTN)),
		"read leases in the liqo namespace":  user.List(ctx, &rbacv1.RoleList{}, client.InNamespace(wire.DefaultLiqoNamespace)),
		"read rolebindings in tenant ns":     user.List(ctx, &rbacv1.RoleBindingList{}, client.InNamespace(pTN)),
		"read clusterroles":                  user.List(ctx, &rbacv1.ClusterRoleList{}),
		"delete the tenant namespace":        user.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pTN}}),
		"create service accounts":            user.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: pTN}}),
		"read events of its tenant":          user.List(ctx, &corev1.EventList{}, client.InNamespace(pTN)),
		"read nodes":                         user.List(ctx, &corev1.NodeList{}),
		"write other tenants' tenant object": user.Get(ctx, client.ObjectKey{Namespace: "liqo-tenant-other", Name: "other"}, &authv1beta1.Tenant{}),
	}
	for what, err := range forbidden {
		assert.Truef(t, apierrors.IsForbidden(err), "the consumer must not %s; got %v", what, err)
	}
}
