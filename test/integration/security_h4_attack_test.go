package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// forgedAdminCreator is a creator record naming a cluster administrator: what an attacker
// writes to have designation review someone who may make tenant records.
func forgedAdminCreator() map[string]string {
	return map[string]string{
		wire.CreatedByAnnotation:       "forged-admin",
		wire.CreatedByUIDAnnotation:    "",
		wire.CreatedByGroupsAnnotation: cluster.EncodeCreatorList([]string{"system:masters", "system:authenticated"}),
		wire.CreatedByExtraAnnotation:  "",
	}
}

// TestNamespaceSubresourcesCannotForgeTheCreator acts as a namespace creator who may also
// write namespaces' status or finalize subresources (as a controller reporting namespace
// conditions, or one finishing namespace deletions, may). The API server lets both
// subresources change a namespace's metadata (the status strategy resets only spec, the
// finalize strategy only status): the creator record must not be writable through them,
// or the namespace becomes a tenant namespace on a forged creator.
func TestNamespaceSubresourcesCannotForgeTheCreator(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "creator-subresources"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()

	// Control: a namespace updater changing the record through the namespace itself is refused.
	updater := principal(t, p, "ns-updater", "", rule("", "namespaces", "create", "get", "update"))
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName("cl-forged-main"), Labels: cluster.TenantNamespaceLabels("cl-forged-main")}}
	require.NoError(t, updater.Create(ctx, plain))
	for k, v := range forgedAdminCreator() {
		plain.Annotations[k] = v
	}
	err := updater.Update(ctx, plain)
	assert.Error(t, err, "the namespace updater changes the creator record")
	assert.Contains(t, errString(err), "who created a namespace does not change")

	for _, sub := range []string{"status", "finalize"} {
		t.Run(sub, func(t *testing.T) {
			id := "cl-forged-" + sub
			writer := principal(t, p, "ns-"+sub+"-writer", "", rule("", "namespaces", "create", "get"), rule("", "namespaces/"+sub, "update"))
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(id), Labels: cluster.TenantNamespaceLabels(id)}}
			require.NoError(t, writer.Create(ctx, ns))
			require.NoError(t, writer.Get(ctx, client.ObjectKeyFromObject(ns), ns))
			for k, v := range forgedAdminCreator() {
				ns.Annotations[k] = v
			}
			err := writer.SubResource(sub).Update(ctx, ns)
			assert.Error(t, err, "namespaces/%s changes the creator record", sub)

			got := &corev1.Namespace{}
			require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(ns), got))
			assert.Equal(t, "ns-"+sub+"-writer", got.Annotations[wire.CreatedByAnnotation], "the recorded creator")

			// What the forged record buys: designation reviews the forged administrator.
			time.Sleep(designationWait)
			rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, id)
			require.NoError(t, err)
			assert.Nil(t, rec, "namespace %s designated as a tenant namespace on a creator forged through namespaces/%s", ns.Name, sub)
			assert.True(t, apierrors.IsNotFound(p.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: wire.ManagerName}, &rbacv1.RoleBinding{})),
				"the manager bound itself in a namespace whose creator was forged through namespaces/%s", sub)
		})
	}
}

// designationWait is longer than designation's grace, and its review.
const designationWait = 6 * time.Second

// TestCreatorRecordOfManyGroups acts as a namespace creator (an administrator of a
// directory with many groups, as Active Directory users often are) creating a tenant
// namespace: the admission policies' CEL must not refuse the creation for its cost, and
// the record must read back exactly.
func TestCreatorRecordOfManyGroups(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "creator-many-groups"), "cl-provider")[0]
	ctx := context.Background()
	const user = "oidc:many-groups"
	principal(t, p, user, "", rule("", "namespaces", "create", "get"))
	for _, n := range []int{100, 500, 2000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			groups := make([]string, n)
			for i := range groups {
				groups[i] = fmt.Sprintf("cn=group-%05d,ou=groups,dc=example,dc=com", i)
			}
			cfg := rest.CopyConfig(p.cp.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, UID: "uid-many", Groups: groups,
				Extra: map[string][]string{"scopes.example.com": {"a,b", "c=d;e%"}}}
			creator := newClient(t, cfg)
			id := fmt.Sprintf("cl-groups-%d", n)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(id), Labels: cluster.TenantNamespaceLabels(id)}}
			start := time.Now()
			require.NoError(t, creator.Create(ctx, ns), "a creator with %d groups creates a tenant namespace", n)
			t.Logf("%d groups: created in %s", n, time.Since(start))
			require.NoError(t, p.client.Get(ctx, client.ObjectKeyFromObject(ns), ns))
			got, ok, err := cluster.NamespaceCreator(ns)
			require.True(t, ok)
			require.NoError(t, err)
			assert.Equal(t, user, got.User)
			assert.Subset(t, got.Groups, groups)
		})
	}
}

// TestManagerSliceBindingsNameOnlyTheSliceUser acts as liqo-auth-manager's ServiceAccount
// (a thief holding its token): a slice's binding (Role liqo-resourceslice-<slice>) goes to
// that slice's user, <slice>-<12 hex digits>, not to the user of another slice whose name
// begins with <slice>- (slice "a" and the user of slice "a-b").
func TestManagerSliceBindingsNameOnlyTheSliceUser(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "manager-slice-bindings"), "cl-provider")[0]
	ctx := context.Background()
	tn := ensureTN(t, p.client, "cl-consumer")
	saCfg, err := p.cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	require.NoError(t, err)
	manager := newClient(t, saCfg)
	sum := sha256.Sum256([]byte("cl-consumer"))
	hash := hex.EncodeToString(sum[:6])
	require.NoError(t, manager.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-a"}, Rules: access.SliceRules("a")}),
		"the slice Role, as the manager makes it")
	for _, tc := range []struct{ what, user string }{
		{"the user of slice a-b", "a-b-" + hash},
		{"a user whose name only begins with the slice's", "a-mallory"},
	} {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-a"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tc.user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "liqo-resourceslice-a"}}
		err := manager.Create(ctx, b)
		assert.Error(t, err, "the manager binds slice a's Role to %s (%s)", tc.what, tc.user)
		if err == nil {
			require.NoError(t, p.client.Delete(ctx, b))
		}
	}
}

// TestPresenceLeaseWriterCannotCollectALiveConsumer acts as a Lease writer of a provider's
// tenant namespace (coordination.k8s.io leases update there, as a namespace operator may
// hold, and weaker than deleting Tenants): the consumer renewed its presence seconds ago,
// the writer clears the Lease's renewTime and acquireTime so that peergc counts from the
// Lease's creation, older than the grace period. The consumer must not be collected before
// a grace period has passed since its last renewal.
func TestPresenceLeaseWriterCannotCollectALiveConsumer(t *testing.T) {
	t.Parallel()
	const grace = 20 * time.Second
	p := peerWithManager(t, "--peer-gone-after="+grace.String())
	ctx, provider, pTN, key := context.Background(), p.provider, p.tn, p.key
	leaseKey, lease := p.presenceLease(t)

	// The consumer renews its presence every second (set up here as the administrator:
	// what the consumer's own manager does), past the grace period counted from the Lease's
	// creation, so that the Lease is older than the grace period.
	renew := func() time.Time {
		now := time.Now()
		require.NoError(t, provider.client.Get(ctx, leaseKey, &lease))
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
		require.NoError(t, provider.client.Update(ctx, &lease))
		return now
	}
	var last time.Time
	for until := lease.CreationTimestamp.Add(grace + 8*time.Second); time.Now().Before(until); time.Sleep(time.Second) {
		last = renew()
	}
	require.NoError(t, provider.client.Get(ctx, key, &authv1beta1.Tenant{}), "a consumer renewing its presence is kept")

	writer := principal(t, provider, "lease-writer", pTN, rule("coordination.k8s.io", "leases", "get", "update"))
	for _, forge := range []struct {
		what string
		set  func(*coordinationv1.Lease)
	}{
		{"clears", func(l *coordinationv1.Lease) { l.Spec.RenewTime, l.Spec.AcquireTime = nil, nil }},
		{"back-dates", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime, l.Spec.AcquireTime = &metav1.MicroTime{Time: l.CreationTimestamp.Time}, &metav1.MicroTime{Time: l.CreationTimestamp.Time}
		}},
	} {
		require.NoError(t, writer.Get(ctx, leaseKey, &lease))
		forge.set(&lease)
		if err := writer.Update(ctx, &lease); err != nil {
			t.Logf("the Lease writer %s the consumer's renewal: refused: %v", forge.what, err)
		}
	}

	for deadline := last.Add(grace - 2*time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		err := provider.client.Get(ctx, key, &authv1beta1.Tenant{})
		if !assert.NoError(t, err, "a consumer that renewed its presence %s ago, less than the grace period %s, is collected",
			time.Since(last).Round(time.Second), grace) {
			return
		}
	}

	// What peergc writes when it gives the Lease to a new Tenant (acquireTime now,
	// renewTime cleared) moves the last sign of life forward, whoever the manager runs as.
	require.NoError(t, provider.client.Get(ctx, leaseKey, &lease))
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}, nil
	assert.NoError(t, provider.client.Update(ctx, &lease), "the manager's adoption of the Lease")
}

// TestForgedKubeconfigSecretsAreNotCachedWhole acts as a Secret writer of a recorded
// tenant namespace (secrets create there, as a namespace operator may hold): it makes
// kubeconfig-* Secrets of 256 KiB whose controller reference names a made-up Identity of
// the Secret's name, with a finalizer of its own so that the garbage collector, which
// deletes them as dangling, cannot remove them. The manager's cache must not keep their
// data: each would cost the manager 256 KiB of memory, for as long as the writer wants.
func TestForgedKubeconfigSecretsAreNotCachedWhole(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "cache-forged-kubeconfig"), "cl-provider")[0]
	tn := ensureTN(t, p.client, "cl-consumer")
	ctx, cached := startScopedProvider(t, p)

	writer := principal(t, p, "secret-writer", tn, rule("", "secrets", "create", "get"))
	big := []byte(strings.Repeat("x", 256<<10))
	var names []string
	for i := range 3 {
		identity := fmt.Sprintf("made-up-%d", i)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.KubeconfigSecretName(identity),
			Labels: map[string]string{wire.RemoteClusterIDLabel: "cl-consumer"}, Finalizers: []string{"example.com/hold"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity", Name: identity,
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i)), Controller: ptr.To(true)}}},
			Data: map[string][]byte{wire.KubeconfigField: big}}
		require.NoError(t, writer.Create(ctx, s))
		names = append(names, s.Name)
		t.Cleanup(func() { // let the control plane delete it
			var live corev1.Secret
			if p.client.Get(context.Background(), client.ObjectKeyFromObject(s), &live) == nil {
				live.Finalizers = nil
				_ = p.client.Update(context.Background(), &live)
			}
		})
	}
	// Past the garbage collector's turn: the Secrets stay, deleted or not, held by their finalizer.
	time.Sleep(10 * time.Second)
	for _, name := range names {
		var live, s corev1.Secret
		require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: tn, Name: name}, &live))
		t.Logf("%s: deletionTimestamp %v", name, live.DeletionTimestamp)
		eventually(t, 10*time.Second, "the cache holds "+name, func(ctx context.Context) (bool, error) {
			return cached.Get(ctx, client.ObjectKey{Namespace: tn, Name: name}, &s) == nil, nil
		})
		assert.Empty(t, s.Data, "the cache keeps whole Secret %s, controlled by an Identity that does not exist", name)
	}
}

// TestNamespaceUpdaterCannotRecordACreatorLater acts as a namespace updater (namespaces
// update, no Liqo rights) on a liqo-tenant-<id> namespace an administrator made without
// the tenant labels: it may label it as a tenant namespace, but the API server records no
// creator on an update, the updater may not add one, and the namespace is not designated.
func TestNamespaceUpdaterCannotRecordACreatorLater(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "creator-relabel"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	const id = "cl-relabel"
	require.NoError(t, p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(id)}}))
	updater := principal(t, p, "ns-relabeller", "", rule("", "namespaces", "get", "update"))
	ns := &corev1.Namespace{}
	require.NoError(t, updater.Get(ctx, client.ObjectKey{Name: wire.TenantNamespaceName(id)}, ns))
	ns.Labels = cluster.TenantNamespaceLabels(id)
	require.NoError(t, updater.Update(ctx, ns), "labels are the updater's to write")
	require.NoError(t, updater.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	assert.NotContains(t, ns.Annotations, wire.CreatedByAnnotation, "no creator recorded on an update")
	ns.Annotations = forgedAdminCreator()
	err := updater.Update(ctx, ns)
	assert.Error(t, err, "the updater records a creator")
	ns.Annotations = map[string]string{wire.CreatedByAnnotation: "ns-relabeller"}
	assert.Error(t, updater.Update(ctx, ns), "the updater records itself as the creator")

	time.Sleep(designationWait)
	rec, err := cluster.GetTenantRecord(ctx, p.client, wire.DefaultLiqoNamespace, id)
	require.NoError(t, err)
	assert.Nil(t, rec, "a namespace labelled after its creation is designated")
}

// TestManagerWritesByUpdateAndApplyAreExact acts as liqo-auth-manager's ServiceAccount (its
// token) writing by update and server-side apply what it may not create: a slice Role with
// more verbs, a reader binding with a second subject, a Lease of another name.
func TestManagerWritesByUpdateAndApplyAreExact(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "manager-updates"), "cl-provider")[0]
	ctx := context.Background()
	tn := ensureTN(t, p.client, "cl-consumer")
	saCfg, err := p.cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	require.NoError(t, err)
	manager := newClient(t, saCfg)

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-b"}, Rules: access.SliceRules("b")}
	require.NoError(t, manager.Create(ctx, role))
	role.Rules[0].Verbs = append(role.Rules[0].Verbs, "update")
	assert.Error(t, manager.Update(ctx, role), "update: a slice Role with more verbs")

	reader := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: wire.TenantReaderName},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cl-consumer"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wire.TenantReaderName}}
	if err := manager.Create(ctx, reader); err != nil {
		require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
		require.NoError(t, manager.Get(ctx, client.ObjectKeyFromObject(reader), reader))
	}
	reader.Subjects = append(reader.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"})
	assert.Error(t, manager.Update(ctx, reader), "update: the reader binding to a second user")

	applied := &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "liqo-resourceslice-b"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "liqo-resourceslice-b"}}
	assert.Error(t, manager.Patch(ctx, applied, client.Apply, client.FieldOwner("thief"), client.ForceOwnership), "apply: a slice binding to another user") //nolint:staticcheck // SA1019: the attack is an apply patch as any client sends it; Client.Apply needs apply configurations
	lease := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: "other"}}
	assert.Error(t, manager.Patch(ctx, lease, client.Apply, client.FieldOwner("thief"), client.ForceOwnership), "apply: a Lease of another name") //nolint:staticcheck // SA1019: as above
}
