package integration

// Attack 71 (helper-37 on 0301c3f): unauthenticate --delete-resourceslices and --leave go
// on past a slice's failed proof and remove the control plane (its Identity here, its
// Tenant there). The copy a failed proof reports stays on the provider with its grant,
// now with no Tenant beside it; what the tools say next about that copy.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// a71LeftCopy peers c with p (a67Slice), has slice name accepted, relabels it as a
// ResourceSlice writer of c's tenant namespace (a69Relabel), and runs args, the first
// teardown: the slice's proof finds its access kept (the consumer's controller let the
// relabelled slice go without its copy) and, since 0301c3f, the control plane is removed
// all the same. At 0301c3f the copy then stayed on the provider with its grant and no
// Tenant beside it, and the run failed; since, the Tenant's deletion takes its consumer's
// slice copies, the slice's proof asked again holds, and the run succeeds. It returns the
// slice identity's kubeconfig.
func a71LeftCopy(t *testing.T, c, p *site, name string, args ...string) []byte {
	t.Helper()
	kc := a67Slice(t, c, p, name)
	a69Relabel(t, c, p, name)
	_, errOut, err := runCLI(t, args...)
	t.Logf("first run: err=%v\n%s", err, errOut)
	if !assert.False(t, a67SliceStillReadsItsCopy(t, c, kc, name), "the Tenant's deletion takes the slice's copy on the provider, and its grant") {
		assert.Error(t, err, "the first run succeeded while the slice's identity reads its copy")
		return kc
	}
	// The slice's first proof failed; asked again once the Tenant took the copy, it holds.
	assert.NoError(t, err, "the first run")
	assert.Contains(t, errOut, "Access of the identity of ResourceSlice "+name+" revoked with the Tenant: verified")
	err = p.client.Get(context.Background(), client.ObjectKey{Namespace: wire.TenantNamespaceName(c.id), Name: c.id}, &authv1beta1.Tenant{})
	t.Logf("the consumer's Tenant on the provider after the first run: %v", err)
	return kc
}

// TestAttack71RerunAfterASlicesFailedProofSaysVerified: a ResourceSlice writer of the
// consumer's tenant namespace (resourceslices get, update) relabels an accepted slice;
// the administrator runs unauthenticate --delete-resourceslices with both kubeconfigs,
// which fails naming the slice's copy left on the provider, and then runs it again (the
// usual answer to a failed teardown). What must hold: no run exits 0 or says "Access
// revoked: verified" while the slice's identity still reads its copy on the provider.
func TestAttack71RerunAfterASlicesFailedProofSaysVerified(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	args := []string{"unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices"}
	kc := a71LeftCopy(t, c, p, "slice-a71a", args...)

	_, errOut, err := runCLI(t, args...)
	t.Logf("re-run: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a71a") {
		assert.Error(t, err, "the re-run succeeded while the slice's identity still reads its copy on the provider")
		assert.NotContains(t, errOut, "Access revoked: verified", "the re-run says verified while the slice's copy keeps its grant")
	}
}

// TestAttack71RerunOfLeaveAfterASlicesFailedProofSucceeds: the same with unauthenticate
// --remote-cluster-id P --leave --delete-resourceslices, run twice.
func TestAttack71RerunOfLeaveAfterASlicesFailedProofSucceeds(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	args := []string{"unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--leave", "--delete-resourceslices"}
	kc := a71LeftCopy(t, c, p, "slice-a71b", args...)

	_, errOut, err := runCLI(t, args...)
	t.Logf("re-run: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a71b") {
		assert.Error(t, err, "the re-run of --leave succeeded while the slice's identity still reads its copy on the provider")
		assert.NotContains(t, errOut, "verified", "the re-run says verified while the slice's copy keeps its grant")
	}
}

// TestAttack71DrainAfterASlicesFailedProofDoesNothing: after the first run above (both
// kubeconfigs), the provider's administrator takes everything the consumer was given away
// with liqoctl drain tenant, the command made for it ("Its ResourceSlices are deleted,
// with ... proves"). Before 0301c3f the failed proof stopped before the control plane:
// the Tenant stayed, and a drain deleted the copy (a Drained tenant's slices are deleted)
// and proved every slice user. Since, the Tenant is gone when the command fails. What
// must hold: drain does not exit 0 while the slice's identity still reads its copy.
func TestAttack71DrainAfterASlicesFailedProofDoesNothing(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := a71LeftCopy(t, c, p, "slice-a71c",
		"unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices")

	_, errOut, err := runCLI(t, "drain", "tenant", c.id, "--kubeconfig", p.cp.Kubeconfig)
	t.Logf("drain: err=%v\n%s", err, errOut)
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a71c") {
		assert.Error(t, err, "drain tenant succeeded while the identity of the consumer's slice still reads its copy on the provider")
	}
}

// TestAttack71SliceWriterAddsASliceDuringUnauthenticate acts as a ResourceSlice writer of
// the consumer's tenant namespace (resourceslices get, update, create). The consumer holds
// an accepted slice; the writer puts a finalizer of its own on it. The administrator runs
// unauthenticate --delete-resourceslices with both kubeconfigs: the command lists the
// slices once and deletes that one (since 76cbd85 it says the slice is held and goes on
// rather than wait for it). Meanwhile the writer asks for a second slice, which the
// consumer's controllers (still running, while the control plane's Identity is still
// there) carry to the provider, where the Tenant is still Active: it is granted when the
// writer is faster than the rest of the teardown, which removes the control plane and
// proves its revocation. What must hold: the command does not exit 0, nor say "Access
// revoked: verified", while the second slice's identity reads its copy on the provider.
func TestAttack71SliceWriterAddsASliceDuringUnauthenticate(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	a67Slice(t, c, p, "slice-a71d")
	cTN := wire.TenantNamespaceName(p.id)
	writer := principal(t, c, "slice-writer-a71", cTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "create"))
	const hold = "example.com/a71-hold"
	setHold := func(on bool) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var rs authv1beta1.ResourceSlice
			if err := writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: "slice-a71d"}, &rs); err != nil {
				return err
			}
			if on {
				controllerutil.AddFinalizer(&rs, hold)
			} else {
				controllerutil.RemoveFinalizer(&rs, hold)
			}
			return writer.Update(ctx, &rs)
		}))
	}
	setHold(true)

	type result struct {
		errOut string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		_, errOut, err := runCLIContext(cctx, "unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices")
		done <- result{errOut, err}
	}()
	eventually(t, time.Minute, "the command deleted the first slice", func(ctx context.Context) (bool, error) {
		var rs authv1beta1.ResourceSlice
		err := writer.Get(ctx, client.ObjectKey{Namespace: cTN, Name: "slice-a71d"}, &rs)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && rs.DeletionTimestamp != nil, err
	})
	require.NoError(t, writer.Create(ctx, localSlice(c, p, "slice-a71e", "", "1")))
	// The second slice is granted only when the writer is faster than the rest of the
	// teardown (a race on a loaded machine); either way what must hold is the same.
	var (
		r     result
		ended bool
		ready bool
	)
	second := client.ObjectKey{Namespace: cTN, Name: wire.SliceIdentityName("slice-a71e")}
	eventually(t, time.Minute, "the second slice is granted, or the command ends first", func(ctx context.Context) (bool, error) {
		if !ended {
			select {
			case r = <-done:
				ended = true
			default:
			}
		}
		var id authv1beta1.Identity
		err := c.client.Get(ctx, second, &id)
		ready = err == nil && meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady)
		return ready || ended, client.IgnoreNotFound(err)
	})
	setHold(false)
	if !ended {
		r = <-done
	}
	t.Logf("unauthenticate: err=%v\n%s", r.err, r.errOut)
	if !ready {
		t.Log("the teardown ended before the second slice was granted: the writer lost the race")
		return
	}
	kc := sliceKubeconfig(t, c, p, "slice-a71e")
	if a67SliceStillReadsItsCopy(t, c, kc, "slice-a71e") {
		assert.Error(t, r.err, "unauthenticate succeeded while the identity of a slice asked during it still reads its copy on the provider")
		assert.NotContains(t, r.errOut, "Access revoked: verified", "the command says verified while that slice's copy keeps its grant")
	}
}

// TestAttack71PlantedSliceWithAFinalizerStillStopsTheTeardown acts with the rights the
// tenant's role gives in its tenant namespace (resourceslices create, get, update): in a
// two-way peering the provider P is C's tenant too, and writes slices in liqo-tenant-P on
// C, the namespace whose every slice C's unauthenticate counts as asked of P. The writer
// plants a slice named to sort first, not marked as a provider's copy, with a finalizer of
// its own. The administrator runs unauthenticate --delete-resourceslices with both
// kubeconfigs. 0301c3f lets a slice's failed proof no longer stop the others, but a slice
// that cannot be deleted still stops at once, before the real slices and the control
// plane, at every run. What must hold: the real slice is removed with its access, or the
// failure names what holds the planted slice (its finalizer), so that someone can remove
// it and a retry goes through.
func TestAttack71PlantedSliceWithAFinalizerStillStopsTheTeardown(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	kc := a67Slice(t, c, p, "slice-a71f")
	const hold = "example.com/a71-planted"
	plantHeldSlice(t, c, p, "tenant-like-a71", hold)

	args := []string{"unauthenticate", "--kubeconfig", c.cp.Kubeconfig, "--remote-kubeconfig", p.cp.Kubeconfig, "--delete-resourceslices", "--timeout", "30s"}
	for run := 1; run <= 2; run++ {
		_, errOut, err := runCLI(t, args...)
		t.Logf("run %d: err=%v\n%s", run, err, errOut)
		if a67SliceStillReadsItsCopy(t, c, kc, "slice-a71f") {
			if assert.Error(t, err, "run %d succeeded while the real slice's identity still reads its copy", run) {
				assert.Contains(t, err.Error(), hold, "run %d: the failure does not name what holds the planted slice; the real slice keeps its access and every retry stops there", run)
			}
		}
	}
}

// plantHeldSlice acts as user, a ResourceSlice writer of c's tenant namespace of p
// (resourceslices get, update, create): it plants slice "a-planted" there (named to sort
// first, naming another provider) carrying finalizers; the test's cleanup lets it go.
func plantHeldSlice(t *testing.T, c, p *site, user string, finalizers ...string) {
	t.Helper()
	writer := principal(t, c, user, wire.TenantNamespaceName(p.id), rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "update", "create"))
	planted := localSlice(c, p, "a-planted", "", "1")
	planted.Labels = map[string]string{wire.RemoteClusterIDLabel: "cl-elsewhere"}
	planted.Finalizers = finalizers
	require.NoError(t, writer.Create(context.Background(), planted))
	t.Cleanup(func() {
		var rs authv1beta1.ResourceSlice
		if c.client.Get(context.Background(), client.ObjectKeyFromObject(planted), &rs) == nil {
			rs.Finalizers = nil
			_ = c.client.Update(context.Background(), &rs)
		}
	})
}
