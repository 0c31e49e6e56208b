package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// TestCSRSquattingIsNeverApproved (security item 1): a principal who may only create
// CertificateSigningRequests pre-creates requests that look like the next renewal of a
// Tenant (its labels, annotations and a name in the provider's style), with its own key
// and the tenant's user name as subject. The provider never approves them, reports them,
// leaves them alone, and renews with a request of its own.
func TestCSRSquattingIsNeverApproved(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "squat-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider, func(o *authmanager.Options) {
		o.Tenant.CertificateLifetime, o.Tenant.RenewBefore = 10*time.Minute, 10*time.Minute-8*time.Second
	})
	ctx := context.Background()
	honest := newAttacker(t, "cl-honest")
	tn := honestHandshake(t, p, honest)
	serial := tn.Status.Certificate.SerialNumber

	squatter := principal(t, p, "csr-creator", "", rule("certificates.k8s.io", "certificatesigningrequests", "create", "get", "list"))
	thief := newAttacker(t, honest.id)
	var squatted []string
	for i, name := range []string{"liqo-cl-honest-" + serial[:10], "liqo-cl-honest-next"} {
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels:      map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: string(tn.UID), wire.RemoteClusterIDLabel: honest.id},
				Annotations: map[string]string{wire.TenantAnnotation: tn.Namespace + "/" + tn.Name, tenant.ReplacesAnnotation: serial}},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: thief.csr(t), SignerName: certificatesv1.KubeAPIServerClientSignerName,
				ExpirationSeconds: ptr.To[int32](600),
				Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
			},
		}
		if i == 1 {
			csr.Spec.Request = tn.Spec.CSR // even the tenant's own request bytes
		}
		require.NoError(t, squatter.Create(ctx, csr))
		squatted = append(squatted, name)
	}
	msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(tn), authv1beta1.ConditionCSRIntegrity, metav1.ConditionFalse, authv1beta1.ReasonForeignCSR)
	for _, name := range squatted {
		assert.Contains(t, msg, name)
	}
	assert.Contains(t, msg, "csr-creator")
	waitEvent(t, p, tn.Namespace, tn.Name, authv1beta1.ReasonForeignCSR)

	eventually(t, 30*time.Second, "the certificate is renewed with the provider's own request", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, client.ObjectKeyFromObject(tn), tn)
		return tn.Status.Certificate != nil && tn.Status.Certificate.SerialNumber != serial, err
	})
	cert, err := authn.ParseCertificate(tn.Status.AuthParams.SignedCRT)
	require.NoError(t, err)
	assert.True(t, authn.PublicKeysEqual(cert.PublicKey, honest.key.Public()), "the renewed certificate is for the honest key")
	for _, name := range squatted {
		var got certificatesv1.CertificateSigningRequest
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: name}, &got), "a foreign CSR is left alone, not deleted")
		approved, _, _ := csrConditions(&got)
		assert.False(t, approved, "CSR %s is never approved", name)
		assert.Empty(t, got.Status.Certificate)
	}
}

// TestLookAlikeNamespaces (security item 2): a principal who may create namespaces and
// Secrets, Tenants and Identities in them labels a namespace as a tenant namespace. On
// the provider its Tenant for another cluster gets nothing; on the consumer its Identity
// (a certificate for the consumer's public key from its own CA) never makes the manager
// write the cluster's private key into that namespace. In the real tenant namespace, an
// Identity with another CA than the pinned one is refused. Honest peers still work.
func TestLookAlikeNamespaces(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "lookalike-consumer", "lookalike-provider")
	sites := installSites(t, cps, "cl-consumer", "cl-provider")
	c, p := sites[0], sites[1]
	startControllers(t, c, authmanager.Consumer)
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	nsCreator := []rbacv1.PolicyRule{
		rule("", "namespaces", "create", "get"), rule("", "secrets", "create", "get", "update"),
		rule("authentication.liqo.io", "tenants", "create", "get"), rule("authentication.liqo.io", "identities", "create", "get", "update"),
	}

	t.Run("provider", func(t *testing.T) {
		mallory := principal(t, p, "ns-creator", "", nsCreator...)
		victim := newAttacker(t, "cl-victim")
		require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evil", Labels: cluster.TenantNamespaceLabels(victim.id)}}))
		nonce, err := authn.NewNonce()
		require.NoError(t, err)
		require.NoError(t, mallory.Create(ctx, secret("evil", wire.NonceSecretName,
			map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: victim.id}, map[string][]byte{wire.NonceField: []byte(nonce)})))
		tn := victim.honestTenant(t, "evil", nonce)
		require.NoError(t, mallory.Create(ctx, tn))
		expectRefused(t, p, tn, string(authv1beta1.ReasonTenantMisplaced))
		got := &authv1beta1.Tenant{}
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tn), got))
		assert.NotContains(t, got.Finalizers, wire.TenantFinalizer, "a misplaced Tenant gets no finalizer")
		// An empty nonce in a look-alike namespace is not filled.
		require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evil-empty", Labels: cluster.TenantNamespaceLabels("cl-other")}}))
		require.NoError(t, mallory.Create(ctx, secret("evil-empty", wire.NonceSecretName, map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: "cl-other"}, nil)))
		waitEvent(t, p, "evil-empty", wire.NonceSecretName, "NonceOutsideTenantNamespace")
		var s corev1.Secret
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: "evil-empty", Name: wire.NonceSecretName}, &s))
		assert.Empty(t, s.Data[wire.NonceField])

		// The namespace of the default name, made ahead of the administrator, is not
		// adopted unless the administrator says so.
		require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName("cl-squat"), Labels: cluster.TenantNamespaceLabels("cl-squat")}}))
		_, _, err = runCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", "cl-squat")
		require.ErrorIs(t, err, cluster.ErrUnrecordedNamespace)
		assert.Contains(t, err.Error(), "--adopt-tenant-namespace")
		rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, "cl-squat")
		require.NoError(t, err)
		assert.Nil(t, rec, "nothing is recorded")
	})

	t.Run("consumer", func(t *testing.T) {
		mallory := principal(t, c, "ns-creator", "", nsCreator...)
		key, err := cluster.GetClusterKey(ctx, c.client, wire.DefaultLiqoNamespace)
		require.NoError(t, err)
		evilCA, err := testenv.NewCA("evil")
		require.NoError(t, err)
		require.NoError(t, mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evil", Labels: cluster.TenantNamespaceLabels(p.id)}}))
		id := &authv1beta1.Identity{
			ObjectMeta: metav1.ObjectMeta{Name: wire.IdentityName(p.id), Namespace: "evil", Labels: map[string]string{wire.RemoteClusterIDLabel: p.id}},
			Spec: authv1beta1.IdentitySpec{ClusterID: authv1beta1.ClusterID(p.id), Type: authv1beta1.ControlPlaneIdentityType, Namespace: ptr.To("liqo-tenant-cl-consumer"),
				AuthParams: authv1beta1.AuthParams{APIServer: "https://evil.example:6443", CA: evilCA.CertPEM, SignedCRT: issueCert(t, evilCA, key.Public(), c.id)}},
		}
		require.NoError(t, mallory.Create(ctx, id))
		waitEvent(t, c, "evil", id.Name, "IdentityNotInTenantNamespace")
		var secrets corev1.SecretList
		require.NoError(t, c.client.List(ctx, &secrets, client.InNamespace("evil")))
		assert.Empty(t, secrets.Items, "no kubeconfig (and no private key) is written into a look-alike namespace")

		// The honest pair authenticates; the provider CA is pinned.
		_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
		require.Contains(t, errOut, "Identity status is filled")
		cTN := wire.TenantNamespaceName(p.id)
		rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
		require.NoError(t, err)
		wantFP, err := authn.CAFingerprint(p.cp.CA.CertPEM)
		require.NoError(t, err)
		assert.Equal(t, wantFP, rec.CAFingerprint)
		before := kubeconfigOf(t, c, p)

		// Someone who may update Identities in the real tenant namespace swaps the CA.
		editor := principal(t, c, "identity-editor", cTN, rule("authentication.liqo.io", "identities", "get", "update"))
		real := &authv1beta1.Identity{}
		require.NoError(t, editor.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, real))
		real.Spec.AuthParams.CA = evilCA.CertPEM
		real.Spec.AuthParams.SignedCRT = issueCert(t, evilCA, key.Public(), c.id)
		require.NoError(t, editor.Update(ctx, real))
		waitEvent(t, c, cTN, real.Name, string(authn.ReasonCAFingerprintMismatch))
		assert.Equal(t, before, kubeconfigOf(t, c, p), "the kubeconfig keeps the pinned CA")
	})

	t.Run("honest peers still work", func(t *testing.T) {
		_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
		require.Contains(t, errOut, "Identity status is filled")
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	})
}

// TestClusterIDThatIsAUserGetsNothing (security item 3): a consumer whose cluster ID is the
// name of a user that already holds permissions on the provider (here bound to
// cluster-admin, or to a role in some namespace) gets no certificate; the refusal names the
// binding. A consumer with a fresh name is served.
func TestClusterIDThatIsAUserGetsNothing(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "userid-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	require.NoError(t, p.client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ops-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "ops-admin"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}))
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-dev"}}))
	require.NoError(t, p.client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-edit", Namespace: "team-dev"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "dev"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}}))

	for id, binding := range map[string]string{"ops-admin": `ClusterRoleBinding "ops-admin"`, "dev": `RoleBinding "dev-edit" in namespace "team-dev"`} {
		t.Run(id, func(t *testing.T) {
			a := newAttacker(t, id)
			ns, nonce := freshNonce(t, p, a.id)
			tn := a.honestTenant(t, ns, nonce)
			require.NoError(t, p.client.Create(ctx, tn))
			msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(tn), authv1beta1.ConditionCertificateIssued, metav1.ConditionFalse, authv1beta1.ReasonClusterIDHasPermissions)
			assert.Contains(t, msg, binding)
			waitEvent(t, p, ns, tn.Name, authv1beta1.ReasonClusterIDHasPermissions)
			assertNoCSRApproved(t, p, id)
			var csrs certificatesv1.CertificateSigningRequestList
			require.NoError(t, p.client.List(ctx, &csrs, client.MatchingLabels{wire.RemoteClusterIDLabel: id}))
			assert.Empty(t, csrs.Items, "no request is even submitted")
			got := &authv1beta1.Tenant{}
			require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(tn), got))
			assert.Nil(t, got.Status.AuthParams)
		})
	}
	t.Run("a fresh cluster ID is served", func(t *testing.T) {
		honestHandshake(t, p, newAttacker(t, "cl-fresh"))
	})
	// The scan reads the manager's index of bindings by subject: a binding made once the
	// controllers run, naming the user after another subject, is found as well.
	t.Run("a binding made later, naming the user second", func(t *testing.T) {
		require.NoError(t, p.client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "late-view", Namespace: "team-dev"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "team-dev"}, {APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "late"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}))
		a := newAttacker(t, "late")
		ns, nonce := freshNonce(t, p, a.id)
		tn := a.honestTenant(t, ns, nonce)
		require.NoError(t, p.client.Create(ctx, tn))
		msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(tn), authv1beta1.ConditionCertificateIssued, metav1.ConditionFalse, authv1beta1.ReasonClusterIDHasPermissions)
		assert.Contains(t, msg, `RoleBinding "late-view" in namespace "team-dev"`)
		assertNoCSRApproved(t, p, "late")
	})
}

// TestKubeconfigSecretsAreNeverExecuted (security item 4): someone who may update Secrets
// in the consumer's tenant namespace rewrites the kubeconfig Secret with an exec plugin
// (and, in turn, a token file) and detaches it from its Identity so that it stays. The
// renewal watcher refuses it with an Event and never runs the command.
func TestKubeconfigSecretsAreNeverExecuted(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "exec-consumer", "exec-provider")
	sites := installSites(t, cps, "cl-consumer", "cl-provider")
	c, p := sites[0], sites[1]
	startControllers(t, c, authmanager.Consumer, func(o *authmanager.Options) { o.WatchRenewals = true })
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
	require.Contains(t, errOut, "Identity status is filled")
	cTN := wire.TenantNamespaceName(p.id)
	secretName := wire.KubeconfigSecretName(wire.IdentityName(p.id))

	dir := t.TempDir()
	marker := filepath.Join(dir, "executed")
	script := filepath.Join(dir, "plugin.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'\n"), 0o700))
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("stolen"), 0o600))

	writer := principal(t, c, "secret-writer", cTN, rule("", "secrets", "get", "update"))
	for name, tamper := range map[string]func(*clientcmdapi.AuthInfo){
		"exec plugin": func(u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		},
		"token file": func(u *clientcmdapi.AuthInfo) { u.TokenFile = tokenFile },
	} {
		t.Run(name, func(t *testing.T) {
			var s corev1.Secret
			require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: secretName}, &s))
			kc, err := clientcmd.Load(s.Data[wire.KubeconfigField])
			require.NoError(t, err)
			for _, u := range kc.AuthInfos {
				tamper(u)
			}
			s.Data[wire.KubeconfigField], err = clientcmd.Write(*kc)
			require.NoError(t, err)
			s.OwnerReferences = nil // so that the identity controller leaves it as it is
			require.NoError(t, writer.Update(ctx, &s))
			eventually(t, 20*time.Second, "the renewal watcher refuses the kubeconfig", func(ctx context.Context) (bool, error) {
				return countEvents(t, c, cTN, wire.IdentityName(p.id), "KubeconfigRefused") > 0, nil
			})
			time.Sleep(500 * time.Millisecond)
			_, err = os.Stat(marker)
			assert.True(t, os.IsNotExist(err), "the exec plugin never ran")
		})
	}
	t.Run("removing the foreign Secret repairs the identity", func(t *testing.T) {
		require.NoError(t, c.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cTN, Name: secretName}}))
		eventually(t, 20*time.Second, "the Identity writes its kubeconfig again", func(ctx context.Context) (bool, error) {
			var id authv1beta1.Identity
			err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(p.id)}, &id)
			return meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady), err
		})
		mustCLI(t, pairArgs("authenticate", c, p)...)
		assertTenantAccess(t, p, c, kubeconfigOf(t, c, p))
	})
}

func countEvents(t *testing.T, s *site, ns, name, reason string) int {
	t.Helper()
	n := 0
	var evs corev1.EventList
	require.NoError(t, s.client.List(context.Background(), &evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			n++
		}
	}
	return n
}

// TestNonceStampsCannotExtendANonce (security item 5): someone who may update the nonce
// Secret stamps it in the future, or restamps an expired nonce with the current time. Both
// are refused; nothing is signed.
func TestNonceStampsCannotExtendANonce(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "stamp-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider, func(o *authmanager.Options) { o.Tenant.NonceTTL = 3 * time.Second })
	ctx := context.Background()
	for name, tc := range map[string]struct {
		wait   time.Duration
		stamp  time.Duration
		reason string
	}{
		"stamped in the future":       {stamp: time.Hour, reason: string(authv1beta1.ReasonNonceIssueTimeInvalid)},
		"expired nonce restamped now": {wait: 4 * time.Second, reason: string(authv1beta1.ReasonNonceExpired)},
		"expired nonce stamped ahead": {wait: 4 * time.Second, stamp: 30 * time.Second, reason: string(authv1beta1.ReasonNonceExpired)},
	} {
		t.Run(name, func(t *testing.T) {
			a := newAttacker(t, "cl-"+strings.ReplaceAll(name, " ", "-"))
			tn, nonce := freshNonce(t, p, a.id)
			time.Sleep(tc.wait)
			writer := principal(t, p, "nonce-writer-"+a.id, tn, rule("", "secrets", "get", "update"))
			var s corev1.Secret
			require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &s))
			s.Annotations[wire.NonceIssuedAtAnnotation] = time.Now().Add(tc.stamp).UTC().Format(time.RFC3339)
			require.NoError(t, writer.Update(ctx, &s))
			tenantObj := a.honestTenant(t, tn, nonce)
			require.NoError(t, p.client.Create(ctx, tenantObj))
			expectRefused(t, p, tenantObj, tc.reason)
		})
	}
}

// TestManagerPermissionsAreExact (security item 6): impersonating the liqo-auth-manager
// ServiceAccount, the API server allows exactly the writes docs/security.md lists: Leases
// and ConfigMaps only in the Liqo namespace; Secrets, Roles and RoleBindings only there
// and in tenant namespaces; never in kube-system or a namespace that only looks like one.
func TestManagerPermissionsAreExact(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "rbac-provider")
	p := installSites(t, cps, "cl-provider")[0]
	ctx := context.Background()
	tn := ensureTN(t, p.client, "cl-consumer")
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "look-alike", Labels: cluster.TenantNamespaceLabels("cl-x")}}))
	liqo := wire.DefaultLiqoNamespace
	sa := "system:serviceaccount:" + liqo + ":" + wire.ManagerName
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + liqo, "system:authenticated"}
	cases := []struct {
		verb, group, resource, sub, ns, name string
		allowed                              bool
	}{
		{"update", "coordination.k8s.io", "leases", "", liqo, "liqo-auth-manager", true},
		// The metrics endpoint in a Pod reviews its scrapers' tokens.
		{"create", "authentication.k8s.io", "tokenreviews", "", "", "", true},
		{"update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager", false},
		{"create", "coordination.k8s.io", "leases", "", "default", "", false},
		{"update", "", "configmaps", "", liqo, "", true},
		{"update", "", "configmaps", "", "kube-system", "", false},
		{"create", "", "secrets", "", liqo, "", false},
		{"update", "", "secrets", "", liqo, wire.KeysSecretName, true},
		{"update", "", "secrets", "", liqo, "other", false},
		{"create", "", "configmaps", "", liqo, "", true},
		{"create", "", "configmaps", "", "kube-system", "", false},
		{"create", "", "secrets", "", tn, "", true},
		{"update", "", "secrets", "", tn, "", true},
		{"delete", "", "secrets", "", tn, "", true},
		{"create", "", "secrets", "", "default", "", false},
		{"update", "", "secrets", "", "kube-system", "", false},
		{"create", "", "secrets", "", "look-alike", "", false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", tn, "", true},
		{"create", "rbac.authorization.k8s.io", "roles", "", tn, "", true},
		// Creating RoleBindings is RBAC's anywhere (to bind itself in a tenant namespace
		// another tool made); the admission policy keeps it to tenant namespaces (below).
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "default", "", true},
		{"update", "rbac.authorization.k8s.io", "rolebindings", "", "kube-system", "", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", wire.ManagerTenantRoleName, true},
		{"create", "rbac.authorization.k8s.io", "roles", "", "look-alike", "", false},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", wire.ControlPlaneRoleName, true},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "cluster-admin", false},
		{"bind", "rbac.authorization.k8s.io", "roles", "", tn, wire.TenantReaderName, true},
		// Writing a Role without the API server's check that it holds every rule: in
		// tenant namespaces only, where admission bounds the Roles it writes to exactly the
		// reader's and slices' (TestManagerBindingsAreExact).
		{"escalate", "rbac.authorization.k8s.io", "roles", "", tn, "", true},
		{"escalate", "rbac.authorization.k8s.io", "roles", "", "default", "", false},
		{"escalate", "rbac.authorization.k8s.io", "roles", "", "kube-system", "", false},
		{"escalate", "rbac.authorization.k8s.io", "roles", "", "look-alike", "", false},
		{"escalate", "rbac.authorization.k8s.io", "roles", "", liqo, "", false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "", false},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "default", "", false},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "kube-system", "", false},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "look-alike", "", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "admin", false},
		{"list", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "", true},
		{"get", "", "secrets", "", "kube-system", "", true},
		{"create", "certificates.k8s.io", "certificatesigningrequests", "", "", "", true},
		{"update", "certificates.k8s.io", "certificatesigningrequests", "approval", "", "", true},
		{"approve", "certificates.k8s.io", "signers", "", "", "kubernetes.io/kube-apiserver-client", true},
		{"approve", "certificates.k8s.io", "signers", "", "", "kubernetes.io/kube-apiserver-client-kubelet", false},
		{"create", "", "pods", "", "default", "", false},
		{"delete", "", "namespaces", "", "", tn, false},
		// A Peering makes its tenant namespace: RBAC's anywhere, the admission policy
		// liqo-auth-manager-namespaces keeps it to tenant namespaces (below).
		{"create", "", "namespaces", "", "", "", true},
		{"update", "", "namespaces", "", "", tn, false},
		{"update", "authentication.liqo.io", "peerings", "", liqo, "", true},
		{"update", "authentication.liqo.io", "peerings", "status", liqo, "", true},
		{"update", "authentication.liqo.io", "peerings", "", "default", "", false},
		{"update", "authentication.liqo.io", "peerings", "status", "default", "", false},
		{"create", "authentication.liqo.io", "peerings", "", liqo, "", false},
		{"delete", "authentication.liqo.io", "peerings", "", liqo, "", false},
		{"watch", "apiextensions.k8s.io", "customresourcedefinitions", "", "", wire.PeeringsCRDName, true},
		{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "tenants.authentication.liqo.io", false},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "", wire.PeeringsCRDName, false},
		{"impersonate", "", "users", "", "", "", false},
		{"create", "", "serviceaccounts", "token", liqo, wire.ManagerName, false},
	}
	for _, tc := range cases {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Namespace: tc.ns, Name: tc.name}}}
		require.NoError(t, p.client.Create(ctx, sar))
		assert.Equal(t, tc.allowed, sar.Status.Allowed, "%s %s/%s %s in %q (%s)", tc.verb, tc.group, tc.resource, tc.sub, tc.ns, sar.Status.Reason)
	}
	t.Run("the admission policy lets it create only tenant namespaces", func(t *testing.T) {
		saCfg, err := p.cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
		require.NoError(t, err)
		manager := newClient(t, saCfg)
		for _, ns := range []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "kube-public-2"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-y", Labels: cluster.TenantNamespaceLabels("cl-z")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "not-a-tenant", Labels: cluster.TenantNamespaceLabels("cl-y")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-y"}},
		} {
			err := manager.Create(ctx, ns)
			require.Error(t, err, "namespace %s %v", ns.Name, ns.Labels)
			assert.Contains(t, err.Error(), "creates no namespace but liqo-tenant-<id>")
		}
		require.NoError(t, manager.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "liqo-tenant-cl-y", Labels: cluster.TenantNamespaceLabels("cl-y")}}))
	})
	// What RBAC cannot scope, the admission policy does: as the manager's ServiceAccount
	// itself, requests it did not make, or not for a Tenant, or for another signer, are
	// refused.
	t.Run("the admission policy bounds its certificate requests", func(t *testing.T) {
		saCfg, err := p.cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
		require.NoError(t, err)
		manager := newClient(t, saCfg)
		key, err := authn.GenerateKey(authn.Ed25519)
		require.NoError(t, err)
		request, err := authn.ForgeCSR(key, "cl-consumer")
		require.NoError(t, err)
		csr := func(signer string, labels map[string]string) *certificatesv1.CertificateSigningRequest {
			return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-", Labels: labels},
				Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: signer, ExpirationSeconds: ptr.To(int32(3600)),
					Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
		}
		ours := map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: "some-uid"}
		err = manager.Create(ctx, csr(certificatesv1.KubeAPIServerClientKubeletSignerName, ours))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "signer "+certificatesv1.KubeAPIServerClientSignerName+" only")
		err = manager.Create(ctx, csr(certificatesv1.KubeAPIServerClientSignerName, nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "handles only requests labelled")

		foreign := csr(certificatesv1.KubeAPIServerClientSignerName, ours)
		require.NoError(t, p.client.Create(ctx, foreign), "a CSR creator labels a request as liqo-auth's")
		foreign.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
		err = manager.SubResource("approval").Update(ctx, foreign)
		require.Error(t, err, "the manager may not approve a request it did not make")
		assert.Contains(t, err.Error(), "approves only the requests it made itself")

		own := csr(certificatesv1.KubeAPIServerClientSignerName, ours)
		require.NoError(t, manager.Create(ctx, own))
		own.Status.Conditions = foreign.Status.Conditions
		require.NoError(t, manager.SubResource("approval").Update(ctx, own), "its own request, as the protocol makes it, is approved")
	})
	t.Run("the admission policy keeps its RoleBindings to tenant namespaces", func(t *testing.T) {
		saCfg, err := p.cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
		require.NoError(t, err)
		manager := newClient(t, saCfg)
		self := []rbacv1.Subject{access.ManagerSubject(liqo)}
		err = manager.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}, Subjects: self,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}})
		require.Error(t, err)
		assertRefusedByOneOf(t, err, "only in liqo-tenant-<id> namespaces", "only where it is bound as a tenant namespace's manager")
		err = manager.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "look-alike", Name: wire.ManagerName}, Subjects: self,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ManagerTenantRoleName}})
		require.Error(t, err, "a labelled namespace not named liqo-tenant-<id>, with no creator recorded")
		assertRefusedByOneOf(t, err, "only in liqo-tenant-<id> namespaces", "only where it is bound as a tenant namespace's manager")
	})

	// The rules in code are the rules installed, and the table in docs/security.md.
	var cr rbacv1.ClusterRole
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &cr))
	assert.Equal(t, access.ManagerRules(), cr.Rules)
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "security.md"))
	require.NoError(t, err)
	for _, r := range append(append(access.ManagerRules(), access.ManagerNamespaceRules()...), access.ManagerTenantRules()...) {
		for _, res := range r.Resources {
			assert.Contains(t, string(doc), strings.TrimSuffix(strings.Split(res, "/")[0], "s"), "docs/security.md lists %s", res)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	require.NoError(t, err)
	return root
}

// TestStatusWritersCannotAcceptATenant (security item 7): someone who may create Tenants
// and write their status, in a real tenant namespace, writes an acceptance for a Tenant
// whose handshake never verified, with no seal or with the seal of an honest Tenant.
// Nothing is submitted to the signer and the forged acceptance is wiped.
func TestStatusWritersCannotAcceptATenant(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "status-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	honest := honestHandshake(t, p, newAttacker(t, "cl-honest"))

	for victimID, seal := range map[string][]byte{"cl-victim-unsealed": nil, "cl-victim-copied-seal": honest.Status.AcceptanceSeal} {
		t.Run(victimID, func(t *testing.T) {
			victim := newAttacker(t, victimID)
			tn := ensureTN(t, p.client, victim.id)
			mallory := principal(t, p, "status-writer-"+victimID, tn,
				rule("authentication.liqo.io", "tenants", "create", "get", "update"), rule("authentication.liqo.io", "tenants/status", "get", "update", "patch"))
			forged := &authv1beta1.Tenant{
				ObjectMeta: metav1.ObjectMeta{Name: victim.id, Namespace: tn, Labels: map[string]string{wire.RemoteClusterIDLabel: victim.id}},
				Spec:       authv1beta1.TenantSpec{ClusterID: authv1beta1.ClusterID(victim.id), PublicKey: victim.pubPEM(t), CSR: victim.csr(t), Signature: []byte("not a signature")},
			}
			require.NoError(t, mallory.Create(ctx, forged))
			expectRefused(t, p, forged, string(authv1beta1.ReasonNonceMissing))
			fp, err := authn.Fingerprint(victim.key.Public())
			require.NoError(t, err)
			require.NoError(t, mallory.Get(ctx, client.ObjectKeyFromObject(forged), forged))
			forged.Status.AcceptedKeyFingerprint, forged.Status.AcceptedCSRDigest = fp, acceptance.CSRDigest(forged.Spec.CSR)
			forged.Status.AcceptanceSeal, forged.Status.AcceptedAt = seal, ptr.To(metav1.Now())
			meta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionAuthenticated, Status: metav1.ConditionTrue, Reason: "HandshakeAccepted", Message: "forged"})
			require.NoError(t, mallory.Status().Update(ctx, forged))
			waitEvent(t, p, tn, forged.Name, string(authn.ReasonAcceptanceSealInvalid))
			eventually(t, 10*time.Second, "the forged acceptance is wiped", func(ctx context.Context) (bool, error) {
				got := &authv1beta1.Tenant{}
				err := p.client.Get(ctx, client.ObjectKeyFromObject(forged), got)
				return err == nil && got.Status.AcceptedKeyFingerprint == "" && len(got.Status.AcceptanceSeal) == 0 &&
					!meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionAuthenticated), err
			})
			assertNothingGranted(t, p, victim.id, tn)
		})
	}
	assertTenantHasAccess(t, p, honest)
}

// assertTenantHasAccess checks with SubjectAccessReviews that tenant t's user still holds
// its control-plane role.
func assertTenantHasAccess(t *testing.T, p *site, tn *authv1beta1.Tenant) {
	t.Helper()
	allowed, err := revocation.AllowedActions(context.Background(), p.client, string(tn.Spec.ClusterID), []string{wire.UserGroup}, tn.Namespace, access.ControlPlaneRules())
	require.NoError(t, err)
	assert.NotEmpty(t, allowed, "the honest tenant keeps its access")
}

// TestRevocationProofCoversEverything (security item 8): a grant to the tenant's user in
// another namespace, or to every authenticated user, keeps unauthenticate from claiming a
// revocation; once they are gone it verifies, and lists the certificates still valid,
// as does liqoctl info.
func TestRevocationProofCoversEverything(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", c, p)...)
	serial := tenantSerial(t, c, p)
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}))
	extra := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "forgotten", Namespace: "elsewhere"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: c.id}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ControlPlaneRoleName}}
	require.NoError(t, p.client.Create(ctx, extra))
	_, _, err := runCLI(t, pairArgs("unauthenticate", c, p)...)
	require.ErrorIs(t, err, handshake.ErrAccessNotRevoked)
	assert.Contains(t, err.Error(), `RoleBinding "forgotten" in namespace "elsewhere"`)
	assert.Contains(t, err.Error(), "groups liqo.io, system:authenticated")
	require.NoError(t, p.client.Delete(ctx, extra))

	everyone := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "everyone-reads-slices"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wire.ControlPlaneRoleName}}
	require.NoError(t, p.client.Create(ctx, everyone))
	_, _, err = runCLI(t, pairArgs("unauthenticate", c, p)...)
	require.ErrorIs(t, err, handshake.ErrAccessNotRevoked)
	assert.Contains(t, err.Error(), "in every namespace", "grants to every authenticated user count")
	require.NoError(t, p.client.Delete(ctx, everyone))

	_, errOut := mustCLI(t, pairArgs("unauthenticate", c, p)...)
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.Contains(t, errOut, "Certificate "+serial)
	assert.Contains(t, errOut, "would re-enable it until it expires")
	out, _ := mustCLI(t, "info", "--kubeconfig", p.cp.Kubeconfig)
	assert.Contains(t, out, serial)
	assert.Contains(t, out, "nothing now")
}

// TestStrayTenantDeletionTouchesNothing (security item 9): someone who may create and
// delete Tenants in a tenant namespace adds a stray Tenant naming the tenant's cluster ID,
// then deletes it. The legitimate tenant keeps its bindings and access.
func TestStrayTenantDeletionTouchesNothing(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "stray-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	honest := honestHandshake(t, p, newAttacker(t, "cl-honest"))
	mallory := principal(t, p, "tenant-writer", honest.Namespace, rule("authentication.liqo.io", "tenants", "create", "get", "delete"))
	stray := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: honest.Namespace, Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-honest"}},
		Spec: authv1beta1.TenantSpec{ClusterID: "cl-honest"}}
	require.NoError(t, mallory.Create(ctx, stray))
	expectRefusedReason(t, p, stray, string(authv1beta1.ReasonTenantNameMismatch))
	require.NoError(t, mallory.Delete(ctx, stray))
	eventually(t, 10*time.Second, "the stray Tenant is gone at once (it has no finalizer)", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKeyFromObject(stray), &authv1beta1.Tenant{})), nil
	})
	time.Sleep(time.Second)
	for _, obj := range access.AccessObjects(honest.Namespace, "cl-honest", nil) {
		require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(obj), obj), "%T %s is still there", obj, obj.GetName())
	}
	assertTenantHasAccess(t, p, honest)
}

// expectRefusedReason waits for the Tenant's Authenticated condition to be False with reason.
func expectRefusedReason(t *testing.T, p *site, tn *authv1beta1.Tenant, reason string) {
	t.Helper()
	waitTenantCondition(t, p, client.ObjectKeyFromObject(tn), authv1beta1.ConditionAuthenticated, metav1.ConditionFalse, reason)
}

// TestSquattedAccessObjectsAreReplaced: whoever may create Roles in a tenant namespace
// (a namespace administrator, weaker than cluster-admin) makes, before the handshake, a
// Role named as the tenant's reader Role, with rules of its own choosing and without
// this project's labels, so that the manager's label-filtered cache does not show it.
// The tenant's binding must not end up pointing at it: the provider replaces it with its
// own, and the tenant's user gets exactly what the protocol grants.
func TestSquattedAccessObjectsAreReplaced(t *testing.T) {
	t.Parallel()
	cps := testenv.New(t, "squat-provider")
	p := installSites(t, cps, "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	a := newAttacker(t, "cl-squatted")
	tn := ensureTN(t, p.client, a.id)
	mallory := principal(t, p, "role-writer", tn, rule("rbac.authorization.k8s.io", "roles", "create", "get"), rule("", "configmaps", "get", "list"))
	squat := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantReaderName, Namespace: tn},
		Rules: []rbacv1.PolicyRule{rule("", "configmaps", "get", "list")}}
	require.NoError(t, mallory.Create(ctx, squat))

	honest := honestHandshake(t, p, a)
	got := &rbacv1.Role{}
	require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(squat), got))
	assert.True(t, metav1.IsControlledBy(got, honest), "the reader Role is the Tenant's own")
	assert.Equal(t, access.TenantReaderRules(a.id), got.Rules)
	allowed, err := revocation.AllowedActions(ctx, p.client, a.id, []string{wire.UserGroup}, tn, []rbacv1.PolicyRule{rule("", "configmaps", "list")})
	require.NoError(t, err)
	assert.Empty(t, allowed, "the tenant's user may not list ConfigMaps: the squatter's rules are gone")
}

// assertRefusedByOneOf checks that err is an admission refusal carrying one of
// the messages. Where two policies both refuse a request, the API server
// reports whichever it evaluated first, and that order is not fixed.
func assertRefusedByOneOf(t *testing.T, err error, messages ...string) {
	t.Helper()
	require.Error(t, err)
	for _, m := range messages {
		if strings.Contains(err.Error(), m) {
			return
		}
	}
	t.Errorf("%q carries none of the expected refusals %q", err, messages)
}
