package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestSliceUserIndexSeesTheRecordsOfHiddenSlices acts as the tenant: it hides the slices whose
// certificates it was issued from the slice path of the indexed lookup (one deleted, one
// without the replication label and with another consumer in its label), and expects a
// Tenant whose cluster ID is either's user still refused through the tenant records'
// index of the real (namespace-scoped, label-filtered) ConfigMap cache.
func TestSliceUserIndexSeesTheRecordsOfHiddenSlices(t *testing.T) {
	t.Parallel()
	p := installSites(t, testenv.New(t, "slice-index-provider"), "cl-provider")[0]
	startControllers(t, p, authmanager.Provider)
	ctx := context.Background()
	alice := newAttacker(t, "cl-alice")
	ta := honestHandshake(t, p, alice)
	asAlice := userClient(t, p, ta.Status.AuthParams.SignedCRT, alice.key)

	issue := func(name string) *authv1beta1.ResourceSlice {
		rs := providerCopy(ta.Namespace, name, alice.id, sliceCSR(t, alice.key, authn.SliceUserName(name, alice.id), alice.id))
		require.NoError(t, asAlice.Create(ctx, rs))
		eventually(t, 20*time.Second, "Alice's slice "+name+" is issued", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
			return err == nil && rs.Status.AuthParams.HasCertificate(), err
		})
		return rs
	}
	refused := func(t *testing.T, slice string) {
		user := newAttacker(t, authn.SliceUserName(slice, alice.id))
		tn, nonce := freshNonce(t, p, user.id)
		tenant := user.honestTenant(t, tn, nonce)
		require.NoError(t, p.client.Create(ctx, tenant))
		msg := waitTenantCondition(t, p, client.ObjectKeyFromObject(tenant), authv1beta1.ConditionAuthenticated, metav1.ConditionFalse, authv1beta1.ReasonClusterIDIsSliceUser)
		assert.Contains(t, msg, "ResourceSlice "+slice)
		assertNoCSRApproved(t, p, user.id)
	}

	t.Run("a deleted slice's certificate still counts", func(t *testing.T) {
		rs := issue("tpu")
		require.NoError(t, asAlice.Delete(ctx, rs))
		eventually(t, 20*time.Second, "the slice is gone", func(ctx context.Context) (bool, error) {
			err := p.client.Get(ctx, client.ObjectKeyFromObject(rs), rs)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		time.Sleep(time.Second) // the cache has seen the deletion
		refused(t, "tpu")
	})

	t.Run("an unlabelled slice's certificate still counts", func(t *testing.T) {
		rs := issue("npu")
		delete(rs.Labels, wire.ReplicationStatusLabel)
		rs.Labels[wire.RemoteClusterIDLabel] = "cl-someone-else"
		rs.Labels["foo.example/x"] = "y"
		require.NoError(t, asAlice.Update(ctx, rs))
		time.Sleep(time.Second)
		refused(t, "npu")
	})
}
