package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// TestTwoProvidersThreeConsumers authenticates three consumers into two providers, and
// checks that no tenant sees or touches another's objects.
func TestTwoProvidersThreeConsumers(t *testing.T) {
	t.Parallel()
	ids := []string{"cl-p1", "cl-p2", "cl-c1", "cl-c2", "cl-c3"}
	sites := installSites(t, testenv.New(t, ids...), ids...)
	providers, consumers := sites[:2], sites[2:]
	ctx := context.Background()
	users := map[[2]string]client.Client{}
	for _, p := range providers {
		for _, c := range consumers {
			_, errOut := mustCLI(t, pairArgs("authenticate", c, p)...)
			require.Contains(t, errOut, "Identity status is filled")
			users[[2]string{p.id, c.id}] = newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
		}
	}
	for _, p := range providers {
		for _, c := range consumers {
			me := users[[2]string{p.id, c.id}]
			own := wire.TenantNamespaceName(c.id)
			rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: own}}
			require.NoError(t, me.Create(ctx, rs), "%s may create in its own namespace on %s", c.id, p.id)
			for _, other := range consumers {
				if other.id == c.id {
					continue
				}
				theirs := wire.TenantNamespaceName(other.id)
				what := fmt.Sprintf("%s on %s, in %s's namespace", c.id, p.id, other.id)
				assert.True(t, apierrors.IsForbidden(me.List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(theirs))), "list: %s", what)
				assert.True(t, apierrors.IsForbidden(me.Get(ctx, client.ObjectKey{Namespace: theirs, Name: "mine"}, &authv1beta1.ResourceSlice{})), "get: %s", what)
				assert.True(t, apierrors.IsForbidden(me.Get(ctx, client.ObjectKey{Namespace: theirs, Name: other.id}, &authv1beta1.Tenant{})), "tenant: %s", what)
				assert.True(t, apierrors.IsForbidden(me.Create(ctx, &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: theirs}})), "create: %s", what)
			}
		}
	}
	// Certificates of p1 do not authenticate on p2: different CAs.
	cfg := restConfigFromKubeconfig(t, kubeconfigOf(t, consumers[0], providers[0]))
	cfg.Host = providers[1].cp.URL
	cfg.CAData = providers[1].cp.CA.CertPEM
	err := newClient(t, cfg).List(ctx, &authv1beta1.ResourceSliceList{}, client.InNamespace(wire.TenantNamespaceName(consumers[0].id)))
	assert.True(t, apierrors.IsUnauthorized(err), "a certificate of another provider's CA is rejected: %v", err)
}
