package integration

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestPeerGCDecidesOnlyOnWhatTheManagerWrote acts as a status writer (tenants/status, as
// another operator on the provider may hold) who back-dates a consumer's acceptance by
// two days under a grace period of a day: the provider keeps the consumer, because
// peergc counts from the presence Lease (the API server's and the manager's times), never
// from the Tenant status.
func TestPeerGCDecidesOnlyOnWhatTheManagerWrote(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	startManager(t, provider, "--consumer=false", "--peer-gone-after=24h")
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	pTN := wire.TenantNamespaceName(consumer.id)
	key := client.ObjectKey{Namespace: pTN, Name: consumer.id}
	eventuallyNoError(t, ctx, "the presence Lease created", func(ctx context.Context) error {
		return provider.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.PresenceLeaseName}, &coordinationv1.Lease{})
	})

	writer := principal(t, provider, "tenant-status-writer", pTN,
		rule(authv1beta1.GroupVersion.Group, "tenants", "get", "list"),
		rule(authv1beta1.GroupVersion.Group, "tenants/status", "get", "update", "patch"))
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, key, &tn))
	tn.Status.AcceptedAt = &metav1.Time{Time: time.Now().Add(-48 * time.Hour)}
	require.NoError(t, writer.Status().Update(ctx, &tn))

	// The update is an event peergc reconciles at once; give it time to act on it.
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		require.NoError(t, provider.client.Get(ctx, key, &authv1beta1.Tenant{}), "a consumer accepted seconds ago is not gone")
	}
}

// TestManagerBindingsAreExact acts as liqo-auth-manager's ServiceAccount (its token, as a
// thief would hold it): RBAC lets it create RoleBindings anywhere, bind the Roles of tenant
// namespaces and create Leases there; admission lets it write exactly the bindings, Roles
// and Lease its controllers make, for the namespace's own peer, and (but for its own
// binding) only where it is bound already.
func TestManagerBindingsAreExact(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "manager-bindings"), "cl-provider")[0]
	ctx := context.Background()
	liqo := wire.DefaultLiqoNamespace
	tn := ensureTN(t, p.client, "cl-consumer")
	creator := principal(t, p, "namespace-creator", "", rule("", "namespaces", "create"))
	evil := wire.TenantNamespaceName("cl-evil")
	require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evil, Labels: cluster.TenantNamespaceLabels("cl-evil")}}))
	// A namespace made before the creator policy (or by Liqo), adopted by the
	// administrator: no creator recorded, the manager bound there by liqoctl.
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName("cl-old")}}
	require.NoError(t, p.client.Create(ctx, old))
	_, err := cluster.EnsureTenantNamespace(ctx, p.client, liqo, "cl-old", true)
	require.NoError(t, err)
	saCfg, err := p.cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
	require.NoError(t, err)
	manager := newClient(t, saCfg)

	user := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}}
	}
	binding := func(ns, name, kind, role string, subjects []rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
	}
	reader := func(name, peer string) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: name}, Rules: access.TenantReaderRules(peer)}
	}
	everything := func(name string) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: name}}
	}
	for _, tc := range []struct {
		what    string
		obj     client.Object
		allowed bool
	}{
		{"its own ClusterRole to a user, in a labelled namespace", binding(evil, "x", "ClusterRole", wire.ManagerName, user("mallory")), false},
		{"its own ClusterRole to a user, in a tenant namespace", binding(tn, "x", "ClusterRole", wire.ManagerName, user("mallory")), false},
		{"its tenant role to a user", binding(tn, wire.ManagerName, "ClusterRole", wire.ManagerTenantRoleName, user("mallory")), false},
		{"the control plane to another user", binding(tn, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName, user("mallory")), false},
		{"the control plane to the peer and another user", binding(tn, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName,
			append(user("cl-consumer"), user("mallory")...)), false},
		{"the control plane to a group", binding(tn, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName,
			[]rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}), false},
		{"the control plane under another name", binding(tn, "x", "ClusterRole", wire.ControlPlaneRoleName, user("cl-consumer")), false},
		{"another Role of the tenant namespace", binding(tn, "x", "Role", "x", user("cl-consumer")), false},
		{"a slice binding to another slice's Role", binding(tn, "liqo-resourceslice-a", "Role", "liqo-resourceslice-b", user("a-0123")), false},
		{"a slice binding to a user not of the slice", binding(tn, "liqo-resourceslice-a", "Role", "liqo-resourceslice-a", user("mallory")), false},
		{"the control plane to the peer, where it is not bound", binding(evil, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName, user("cl-evil")), false},
		{"a reader Role with another peer's rules", reader(wire.TenantReaderName, "cl-other"), false},
		{"a Role of another name", reader("x", "cl-consumer"), false},
		{"a slice Role with the reader's rules", reader("liqo-resourceslice-a", "cl-consumer"), false},
		{"a Lease of another name", lease("other"), false},
		// The manager may write Roles in tenant namespaces without holding their rules
		// (escalate, for speed): admission alone keeps them to exactly these rules
		// (every shape of write: TestAttackEscalate).
		{"the reader Role with every right", everything(wire.TenantReaderName), false},
		{"a slice Role with every right", everything("liqo-resourceslice-b"), false},
		{"a Role of another name with every right", everything("x"), false},
		// What the controllers make is allowed.
		{"the control plane to the peer", binding(tn, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName, user("cl-consumer")), true},
		{"the reader Role", reader(wire.TenantReaderName, "cl-consumer"), true},
		{"the reader binding", binding(tn, wire.TenantReaderName, "Role", wire.TenantReaderName, user("cl-consumer")), true},
		{"a slice Role", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-a"}, Rules: access.SliceRules("a")}, true},
		{"a slice binding", binding(tn, "liqo-resourceslice-a", "Role", "liqo-resourceslice-a", user("a-0123456789ab")), true},
		{"the presence Lease", lease(wire.PresenceLeaseName), true},
		{"the control plane to the peer, in an adopted namespace", binding(old.Name, wire.ControlPlaneBindingName, "ClusterRole", wire.ControlPlaneRoleName, user("cl-old")), true},
	} {
		err := manager.Create(ctx, tc.obj)
		if tc.allowed {
			assert.NoError(t, err, tc.what)
		} else {
			assert.Error(t, err, tc.what)
			assert.NotContains(t, errString(err), "already exists", tc.what)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestStatusWriterCannotMakeTheProviderIssue acts as a status writer who replaces, then
// clears, the certificate a Tenant publishes: the provider puts back the one it published
// (the same serial, from its tenant record), and issues nothing.
func TestStatusWriterCannotMakeTheProviderIssue(t *testing.T) {
	t.Parallel()
	p := peerWithManager(t)
	ctx, provider, key := context.Background(), p.provider, p.key
	serial := tenantSerial(t, p.consumer, provider)
	require.NotEmpty(t, serial)
	issued := func() int { return p.issued(t) }
	before := issued()

	writer := p.statusWriter(t)
	var tn authv1beta1.Tenant
	require.NoError(t, writer.Get(ctx, key, &tn))
	key2, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: p.consumer.id, Organization: []string{wire.UserGroup}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key2.Public(), key2)
	require.NoError(t, err)
	tn.Status.AuthParams.SignedCRT = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	require.NoError(t, writer.Status().Update(ctx, &tn))

	eventuallyNoError(t, ctx, "the published certificate put back", func(ctx context.Context) error {
		var got authv1beta1.Tenant
		if err := provider.client.Get(ctx, key, &got); err != nil {
			return err
		}
		cert, err := authn.ParseCertificate(got.Status.AuthParams.SignedCRT)
		if err != nil || cert.SerialNumber.Text(16) != serial {
			return fmt.Errorf("published %v (%v), want serial %s", cert, err, serial)
		}
		return nil
	})
	assert.Equal(t, serial, tenantSerial(t, p.consumer, provider))
	assert.Equal(t, before, issued(), "no certificate issued")

	// Clearing what the status publishes is no request for a new certificate either, and
	// the Tenant is Ready again: what is put back comes with the condition that announces
	// it, even when the writer left that condition saying it waits for the signer (as a
	// status save that lost a race after an issuance does).
	require.NoError(t, writer.Get(ctx, key, &tn))
	tn.Status.AuthParams, tn.Status.Certificate = &authv1beta1.AuthParams{APIServer: tn.Status.AuthParams.APIServer}, nil
	for _, typ := range []string{authv1beta1.ConditionCertificateIssued, authv1beta1.ConditionReady} {
		meta.SetStatusCondition(&tn.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: authv1beta1.ReasonCertificatePending,
			Message: "waiting for the signer to issue CertificateSigningRequest liqo-cl-consumer-x"})
	}
	require.NoError(t, writer.Status().Update(ctx, &tn))
	eventuallyNoError(t, ctx, "the cleared certificate put back, the Tenant Ready", func(ctx context.Context) error {
		var got authv1beta1.Tenant
		if err := provider.client.Get(ctx, key, &got); err != nil {
			return err
		}
		if !got.Status.AuthParams.HasCertificate() || got.Status.Certificate == nil || got.Status.Certificate.SerialNumber != serial {
			return fmt.Errorf("published %+v, want serial %s", got.Status.Certificate, serial)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, authv1beta1.ConditionReady) {
			return fmt.Errorf("not Ready: %+v", meta.FindStatusCondition(got.Status.Conditions, authv1beta1.ConditionReady))
		}
		return nil
	})
	assert.Equal(t, before, issued(), "no certificate issued for a cleared status")
}

// TestRelabelledSliceIsNotForgotten acts as a slice writer of the consumer's tenant
// namespace who relabels a slice asked of the provider for another provider, and drops its
// request label: unauthenticate --remote-cluster-id still finds it (the namespace names
// the peer), refuses without --delete-resourceslices and removes it with it.
func TestRelabelledSliceIsNotForgotten(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	mustCLI(t, "create", "resourceslice", "slice-h", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "--cpu", "1",
		"--remote-kubeconfig", provider.cp.Kubeconfig)
	cTN := wire.TenantNamespaceName(provider.id)
	writer := principal(t, consumer, "slice-writer", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "patch"))
	var rs authv1beta1.ResourceSlice
	require.NoError(t, writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: "slice-h"}, &rs))
	rs.Labels[wire.RemoteClusterIDLabel] = "cl-other"
	delete(rs.Labels, wire.ReplicationRequestedLabel)
	require.NoError(t, writer.Update(ctx, &rs))

	_, _, err := runCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id)
	require.Error(t, err, "a slice asked of the provider is still there")
	assert.Contains(t, err.Error(), "slice-h")
	mustCLI(t, "unauthenticate", "--kubeconfig", consumer.cp.Kubeconfig, "--remote-cluster-id", provider.id, "--delete-resourceslices")
	eventuallyNoError(t, ctx, "the relabelled slice deleted", func(ctx context.Context) error {
		err := consumer.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: "slice-h"}, &authv1beta1.ResourceSlice{})
		if err == nil {
			return fmt.Errorf("slice-h is still there")
		}
		return client.IgnoreNotFound(err)
	})
}
