package integration

// Attack 74 (helper-39 F1 on 74d1d36, by reading; fixed by 418c52e): the tenant writes
// the copies of its consumer's slices in its tenant namespace on the provider (the
// control-plane role has resourceslices create, get, update, delete there), finalizers
// included. A finalizer of its own on a copy holds the copy once it is deleted, after the
// provider's finalize removed its grant and its finalizer. The consumer's slice
// controller waited for the copy to be gone before letting its slice go, and every
// teardown (delete resourceslice, unauthenticate --delete-resourceslices, --leave) waits
// for that slice before the control plane: the tenant held the consumer's own teardown.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// a74Hold is the tenant's own finalizer on its copy.
const a74Hold = "example.com/a74-hold"

// a74Timeout bounds each teardown's waits (liqoctl --timeout): before 418c52e the command
// waited for the held copy until then.
const a74Timeout = 40 * time.Second

// a74HeldCopy peers c with p (a67Slice), has slice name accepted, and then acts as the
// tenant, with its own certificate (the control-plane Identity's kubeconfig on c, never an
// administrator's): it puts a finalizer of its own on the slice's copy in its tenant
// namespace on p. The test's cleanup takes it off, as p's administrator. It returns the
// slice identity's kubeconfig and the tenant's client.
func a74HeldCopy(t *testing.T, c, p *site, name string) (kc []byte, tenant client.Client) {
	t.Helper()
	ctx := context.Background()
	kc = a67Slice(t, c, p, name)
	tenantKC := kubeconfigOf(t, c, p)
	info, err := authn.ReadKubeconfig(tenantKC)
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	require.Equal(t, c.id, cert.Subject.CommonName, "setup: the tenant acts with its own control-plane certificate")
	tenant = newClient(t, restConfigFromKubeconfig(t, tenantKC))

	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: name}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if err := tenant.Get(ctx, key, &rs); err != nil {
			return err
		}
		controllerutil.AddFinalizer(&rs, a74Hold)
		return tenant.Update(ctx, &rs)
	}), "setup: the tenant writes its copy's finalizers")
	t.Cleanup(func() {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var rs authv1beta1.ResourceSlice
			if err := p.client.Get(context.Background(), key, &rs); err != nil {
				return client.IgnoreNotFound(err)
			}
			controllerutil.RemoveFinalizer(&rs, a74Hold)
			return p.client.Update(context.Background(), &rs)
		})
	})
	var rs authv1beta1.ResourceSlice
	require.NoError(t, p.client.Get(ctx, key, &rs))
	require.Contains(t, rs.Finalizers, wire.ProviderSliceFinalizer, "setup: the provider granted the copy")
	require.Contains(t, rs.Finalizers, a74Hold)
	require.NotEmpty(t, a74BindingsOf(t, p, key.Namespace, authn.SliceUserName(name, c.id)), "setup: the slice's user is bound")
	require.True(t, a74SliceUserMay(t, c, p, kc, "get", name), "setup: the slice's user may read its copy")
	return kc, tenant
}

// a74Run runs liqoctl with args and a74Timeout, and logs what it says and how long it took.
func a74Run(t *testing.T, args ...string) (errOut string, took time.Duration, err error) {
	t.Helper()
	start := time.Now()
	_, errOut, err = runCLI(t, append(args, "--timeout", a74Timeout.String())...)
	took = time.Since(start)
	cmd := args[0]
	if cmd == "delete" {
		cmd += " " + args[1]
	}
	t.Logf("liqoctl %s: err=%v (took %v)\n%s", cmd, err, took.Round(time.Millisecond), errOut)
	return errOut, took, err
}

// a74AssertOnlyCertificateWarnings asserts that the only warnings of a teardown are the
// usual one of the certificates that stay cryptographically valid: nothing about the slice,
// whose copy the tenant holds without a grant.
func a74AssertOnlyCertificateWarnings(t *testing.T, errOut string) {
	t.Helper()
	for line := range strings.Lines(errOut) {
		if strings.HasPrefix(line, "WARN") {
			assert.Contains(t, line, "stay cryptographically valid", "a warning other than the certificates'")
		}
	}
}

// a74SliceUserMay asks p's API server (a SubjectAccessReview, as its administrator) whether
// the user and groups of the slice identity's certificate (kubeconfig kc) may do verb on
// its copy in c's tenant namespace.
func a74SliceUserMay(t *testing.T, c, p *site, kc []byte, verb, name string) bool {
	t.Helper()
	info, err := authn.ReadKubeconfig(kc)
	require.NoError(t, err)
	cert, err := authn.ParseCertificate(info.CertPEM)
	require.NoError(t, err)
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: cert.Subject.CommonName, Groups: append(slices.Clone(cert.Subject.Organization), "system:authenticated"),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: wire.TenantNamespaceName(c.id), Verb: verb,
			Group: authv1beta1.GroupVersion.Group, Resource: "resourceslices", Name: name}}}
	require.NoError(t, p.client.Create(context.Background(), sar))
	return sar.Status.Allowed
}

// a74BindingsOf names the RoleBindings in ns on p that bind user.
func a74BindingsOf(t *testing.T, p *site, ns, user string) []string {
	t.Helper()
	var rbs rbacv1.RoleBindingList
	require.NoError(t, p.client.List(context.Background(), &rbs, client.InNamespace(ns)))
	var names []string
	for _, rb := range rbs.Items {
		if slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.UserKind && s.Name == user }) {
			names = append(names, rb.Name)
		}
	}
	return names
}

// a74AssertHeldWithoutGrant asserts what the teardown left: the consumer's slice and its
// Identity gone on c, with a Warning Event on the slice that says its copy is held; on p, the copy still there, deleted and held by the tenant's
// finalizer only (the provider's finalize done: the attack really held it), and nothing of
// its grant: no Role or RoleBinding of the slice, a SubjectAccessReview of the slice's
// user denied, its own certificate unable to read the copy.
func a74AssertHeldWithoutGrant(t *testing.T, c, p *site, kc []byte, name string) {
	t.Helper()
	ctx := context.Background()
	cTN, pTN := wire.TenantNamespaceName(p.id), wire.TenantNamespaceName(c.id)
	t.Logf("after the teardown: %s", a73CopyState(t, c, p, name))
	err := c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: name}, &authv1beta1.ResourceSlice{})
	assert.True(t, apierrors.IsNotFound(err), "the consumer's slice is gone: %v", err)
	err = c.client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName(name)}, &authv1beta1.Identity{})
	assert.True(t, apierrors.IsNotFound(err), "the slice's Identity is gone: %v", err)
	// The consumer is told where its slice's copy stays, and who lets it go (helper-41).
	waitEvent(t, c, cTN, name, authv1beta1.ReasonSliceCopyHeld)

	var cp authv1beta1.ResourceSlice
	if assert.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &cp), "the tenant's finalizer holds the copy") {
		assert.NotNil(t, cp.DeletionTimestamp, "the copy was deleted")
		assert.Equal(t, []string{a74Hold}, cp.Finalizers, "the provider's finalize is done; the tenant's finalizer alone holds the copy")
	}
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}} {
		err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.SliceAccessName(name)}, obj)
		assert.True(t, apierrors.IsNotFound(err), "%T %s of the held copy is gone: %v", obj, wire.SliceAccessName(name), err)
	}
	for _, verb := range []string{"get", "list", "watch"} {
		assert.False(t, a74SliceUserMay(t, c, p, kc, verb, name), "the slice's user may still %s its held copy", verb)
	}
	assert.Empty(t, a74BindingsOf(t, p, pTN, authn.SliceUserName(name, c.id)), "RoleBindings of the slice's user are left")
	assert.False(t, a67SliceStillReadsItsCopy(t, c, kc, name), "the slice identity reads its held copy with its own certificate")
}

// a74AssertTenantRevoked asserts that the tenant, its Tenant removed, can do nothing with
// its held copy: not read it, not rewrite it, not take its finalizer off, and that no
// access of its own is left in its tenant namespace.
func a74AssertTenantRevoked(t *testing.T, c, p *site, tenant client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	pTN := wire.TenantNamespaceName(c.id)
	err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: c.id}, &authv1beta1.Tenant{})
	assert.True(t, apierrors.IsNotFound(err), "the consumer's Tenant on the provider is gone: %v", err)
	err = tenant.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &authv1beta1.ResourceSlice{})
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), "the tenant still reads its held copy: %v", err)
	var cp authv1beta1.ResourceSlice
	require.NoError(t, p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: name}, &cp))
	controllerutil.RemoveFinalizer(&cp, a74Hold)
	err = tenant.Update(ctx, &cp)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), "the tenant still writes its held copy: %v", err)
	for _, verb := range []string{"get", "update", "create", "delete"} {
		assert.False(t, selfCan(t, tenant, verb, authv1beta1.GroupVersion.Group, "resourceslices", pTN, ""), "the tenant may still %s resourceslices in %s", verb, pTN)
	}
}

// TestAttack74TenantHoldsItsCopyUnauthenticateGoesOn: the tenant holds its slice's copy
// with a finalizer of its own; the consumer's administrator runs unauthenticate
// --delete-resourceslices with both kubeconfigs. What must hold (418c52e): the command
// does not wait for the held copy: it exits 0 well before its --timeout, says the slice's
// access and the control plane's are revoked, verified; the copy stays, held, with no
// grant; the tenant, its Tenant gone, can do nothing with it.
func TestAttack74TenantHoldsItsCopyUnauthenticateGoesOn(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const name = "slice-a74a"
	kc, tenant := a74HeldCopy(t, c, p, name)

	errOut, took, err := a74Run(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices")
	require.NoError(t, err, "unauthenticate stalled on the copy the tenant holds (took %v)\nstderr:\n%s", took, errOut)
	assert.Less(t, took, a74Timeout, "the command waited its whole --timeout")
	assert.Contains(t, errOut, "ResourceSlice "+name+" deleted here, and its Identity")
	assert.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	assert.Contains(t, errOut, "INFO (remote) Tenant deleted")
	assert.Contains(t, errOut, "INFO (remote) Access revoked: verified")
	a74AssertOnlyCertificateWarnings(t, errOut)
	a74AssertHeldWithoutGrant(t, c, p, kc, name)
	a74AssertTenantRevoked(t, c, p, tenant, name)
}

// TestAttack74TenantHoldsItsCopyLeaveGoesOn: the same with unauthenticate
// --remote-cluster-id P --leave --delete-resourceslices, the consumer alone (its own
// certificate on the provider, no provider administrator).
func TestAttack74TenantHoldsItsCopyLeaveGoesOn(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	const name = "slice-a74b"
	kc, tenant := a74HeldCopy(t, c, p, name)

	errOut, took, err := a74Run(t, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--delete-resourceslices")
	require.NoError(t, err, "leave stalled on the copy the tenant holds (took %v)\nstderr:\n%s", took, errOut)
	assert.Less(t, took, a74Timeout, "the command waited its whole --timeout")
	assert.Contains(t, errOut, "ResourceSlice "+name+" deleted here, and its Identity")
	assert.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	// The Tenant's deletion is waited for until it is gone, or until its read is refused
	// because the provider's finalize already removed the reader binding: either ends the
	// wait (deleteOwnTenant), and which comes first is a race.
	assert.True(t, strings.Contains(errOut, `INFO (local) Tenant gone on provider "`+p.id+`"`) ||
		strings.Contains(errOut, `INFO (local) This cluster may no longer read its Tenant on provider "`+p.id+`": its access is being removed`),
		"the Tenant's deletion is not seen through:\n%s", errOut)
	assert.Contains(t, errOut, `INFO (local) Access on provider "`+p.id+`" revoked: verified with this cluster's own certificate`)
	a74AssertOnlyCertificateWarnings(t, errOut)
	a74AssertHeldWithoutGrant(t, c, p, kc, name)
	a74AssertTenantRevoked(t, c, p, tenant, name)
}

// TestAttack74TenantHoldsItsCopyDeleteResourceSliceGoesOn: the tenant holds its slice's
// copy; the consumer's administrator gives the slice back with liqoctl delete
// resourceslice. What must hold: the command exits 0 well before its --timeout, the
// slice's access revoked, verified. The Tenant stays, and with it the tenant's rights in
// its tenant namespace: it rewrites its held copy (more resources, a request of a key of
// its own, the labels of a consumer's copy). What must hold: the deleted copy is given
// nothing again (no Role or RoleBinding, no new answer in its status, the slice's user
// denied), and once the tenant lets it go, nothing of it is left.
func TestAttack74TenantHoldsItsCopyDeleteResourceSliceGoesOn(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	const name = "slice-a74c"
	kc, tenant := a74HeldCopy(t, c, p, name)

	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	require.NoError(t, err, "delete resourceslice stalled on the copy the tenant holds (took %v)\nstderr:\n%s", took, errOut)
	assert.Less(t, took, a74Timeout, "the command waited its whole --timeout")
	assert.Contains(t, errOut, "ResourceSlice "+name+" deleted here, and its Identity")
	assert.Contains(t, errOut, "Access of the slice's identity revoked: verified with its own certificate")
	a74AssertOnlyCertificateWarnings(t, errOut)
	a74AssertHeldWithoutGrant(t, c, p, kc, name)

	// The tenant, still a tenant, rewrites the held copy to have it granted again.
	pTN := wire.TenantNamespaceName(c.id)
	key := client.ObjectKey{Namespace: pTN, Name: name}
	var before authv1beta1.ResourceSlice
	require.NoError(t, p.client.Get(ctx, key, &before))
	sliceKey, err := authn.GenerateKey(authn.Ed25519)
	require.NoError(t, err)
	csr, err := authn.ForgeCSRFor(sliceKey, authn.SliceUserName(name, c.id), c.id)
	require.NoError(t, err)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if getErr := tenant.Get(ctx, key, &rs); getErr != nil {
			return getErr
		}
		rs.Spec.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		rs.Spec.CSR = csr
		rs.Labels[wire.ReplicationStatusLabel] = "true"
		rs.Labels[wire.RemoteClusterIDLabel] = c.id
		return tenant.Update(ctx, &rs)
	}), "the tenant rewrites its held copy")
	// Adding a finalizer to a deleted object is refused by the API server itself.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if getErr := tenant.Get(ctx, key, &rs); getErr != nil {
			return getErr
		}
		controllerutil.AddFinalizer(&rs, wire.ProviderSliceFinalizer)
		return tenant.Update(ctx, &rs)
	})
	t.Logf("the tenant puts the provider's finalizer back on its held copy: %v", err)
	assert.Error(t, err, "a finalizer was added to a copy being deleted")

	// The provider's controllers see the rewrite: nothing is granted again.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var rs authv1beta1.ResourceSlice
		require.NoError(t, p.client.Get(ctx, key, &rs))
		require.True(t, equality.Semantic.DeepEqual(before.Status, rs.Status), "the held copy was answered again: %+v", rs.Status)
		require.Equal(t, []string{a74Hold}, rs.Finalizers)
		err := p.client.Get(ctx, client.ObjectKey{Namespace: pTN, Name: wire.SliceAccessName(name)}, &rbacv1.RoleBinding{})
		require.True(t, apierrors.IsNotFound(err), "the held copy was granted again: RoleBinding %s: %v", wire.SliceAccessName(name), err)
		require.False(t, a74SliceUserMay(t, c, p, kc, "get", name), "the slice's user may read its held copy again")
		time.Sleep(time.Second)
	}
	t.Logf("after the tenant's rewrite: %s", a73CopyState(t, c, p, name))

	// The tenant lets its copy go: nothing of it is left.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rs authv1beta1.ResourceSlice
		if getErr := tenant.Get(ctx, key, &rs); getErr != nil {
			return getErr
		}
		controllerutil.RemoveFinalizer(&rs, a74Hold)
		return tenant.Update(ctx, &rs)
	}))
	eventually(t, 30*time.Second, "the held copy is gone once the tenant lets it go", func(ctx context.Context) (bool, error) {
		err := p.client.Get(ctx, key, &authv1beta1.ResourceSlice{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	assert.False(t, a74SliceUserMay(t, c, p, kc, "get", name))
	assert.Empty(t, a74BindingsOf(t, p, pTN, authn.SliceUserName(name, c.id)), "RoleBindings of the slice's user are left")
}
