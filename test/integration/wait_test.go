package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// TestWaitStartsFromTheObjectWritten: liqoctl's waits for the Tenant's and the Identity's
// status start from the object as the command wrote it, without a list first: one request
// fewer per wait. What the write answered is decided on at once; a change after it is seen
// by the watch from its resourceVersion; a version too old for the API server to watch
// from falls back to a list, and the wait still ends.
func TestWaitStartsFromTheObjectWritten(t *testing.T) {
	t.Parallel()
	s := installSites(t, testenv.New(t, "waitfrom"), "cl-waiter")[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "wait-from"
	require.NoError(t, s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	written := &authv1beta1.Identity{ObjectMeta: metaOf(ns, "waited"),
		Spec: authv1beta1.IdentitySpec{ClusterID: "cl-waited", Type: authv1beta1.ControlPlaneIdentityType}}
	require.NoError(t, s.client.Create(ctx, written))
	side := sideOf(s.client)
	gets := func(before testenv.APICounters) float64 {
		after, err := testenv.ReadAPICounters(ctx, s.cp.Config)
		require.NoError(t, err)
		used := after.Since(before)
		return used["request GET identities"] + used["request LIST identities"]
	}
	counters := func() testenv.APICounters {
		c, err := testenv.ReadAPICounters(ctx, s.cp.Config)
		require.NoError(t, err)
		return c
	}

	// The status comes after the write: the watch from the write's version sees it.
	before := counters()
	ready := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		cur := written.DeepCopy()
		now := metav1.Now()
		cur.Status.Certificate = &authv1beta1.CertificateInfo{SerialNumber: "abcd", NotBefore: &now, NotAfter: ptr.To(metav1.NewTime(now.Add(time.Hour)))}
		cur.Status.KubeconfigSecretRef = &corev1.LocalObjectReference{Name: "kubeconfig"}
		cur.Status.ObservedGeneration = cur.Generation
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: authv1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Ready", Message: "written", ObservedGeneration: cur.Generation})
		ready <- s.client.Status().Update(ctx, cur)
	}()
	got, err := handshake.WaitIdentity(ctx, side, written.DeepCopy(), "abcd")
	require.NoError(t, err)
	require.NoError(t, <-ready)
	assert.Equal(t, "abcd", got.Status.Certificate.SerialNumber)
	assert.Zero(t, gets(before), "the wait read the Identity instead of watching from the write")

	// What the write answered is already done: no request at all.
	before = counters()
	again, err := handshake.WaitIdentity(ctx, side, got, "abcd")
	require.NoError(t, err)
	assert.Equal(t, got.ResourceVersion, again.ResourceVersion)
	assert.Zero(t, gets(before))

	// A version the API server no longer keeps: the wait lists, and ends.
	stale := written.DeepCopy()
	stale.ResourceVersion = "1"
	got, err = handshake.WaitIdentity(ctx, side, stale, "abcd")
	require.NoError(t, err, "a wait from a version too old to watch from")
	assert.Equal(t, "abcd", got.Status.Certificate.SerialNumber)
}
