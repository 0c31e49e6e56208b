package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// TestTenantCarriesTheFinalizerFromItsCreation: where a liqo-auth-manager runs, liqoctl
// applies the Tenant with the manager's finalizer already on (the manager patches none in:
// a write, its watch events and a reconcile fewer per handshake), and unauthenticate still
// lets it go. A Tenant writer who creates a Tenant that is refused, with that finalizer on,
// gets nothing from it, and its deletion is not held: the manager finalizes every Tenant
// deleted. (In-process, liqoctl leaves the finalizer to the controllers:
// TestCLIAuthenticateInProcess.)
func TestTenantCarriesTheFinalizerFromItsCreation(t *testing.T) {
	t.Parallel()
	consumer, provider := cliSites(t)
	startManager(t, consumer)
	startManager(t, provider)
	ctx := context.Background()
	mustCLI(t, pairArgs("authenticate", consumer, provider)...)
	key := client.ObjectKey{Namespace: wire.TenantNamespaceName(consumer.id), Name: consumer.id}
	var got authv1beta1.Tenant
	require.NoError(t, provider.client.Get(ctx, key, &got))
	assert.Equal(t, []string{wire.FieldOwner + " Apply"}, finalizerOwners(t, &got),
		"liqoctl's apply made the Tenant with the manager's finalizer, and the manager patched none in")

	// A Tenant writer of another tenant namespace, with a Tenant whose signature is not the
	// nonce's: refused, nothing granted (expectRefused), and deleted at once.
	mallory := newAttacker(t, "cl-mallory")
	tn, nonce := freshNonce(t, provider, mallory.id)
	writer := principal(t, provider, "tenant-writer", tn, rule(authv1beta1.GroupVersion.Group, "tenants", "create", "get", "delete"))
	bad := mallory.honestTenant(t, tn, nonce)
	bad.Spec.Signature = newAttacker(t, mallory.id).sign(t, nonce)
	bad.Finalizers = []string{wire.TenantFinalizer}
	require.NoError(t, writer.Create(ctx, bad))
	expectRefused(t, provider, bad, string(authn.ReasonSignatureInvalid))
	require.NoError(t, writer.Delete(ctx, &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: mallory.id}}))
	eventually(t, 20*time.Second, "the refused Tenant, deleted, is let go by the manager", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(provider.client.Get(ctx, client.ObjectKeyFromObject(bad), &got)), nil
	})

	_, errOut := mustCLI(t, pairArgs("unauthenticate", consumer, provider)...)
	assert.Contains(t, errOut, "Access revoked: verified")
	assert.True(t, apierrors.IsNotFound(provider.client.Get(ctx, key, &got)), "unauthenticate removes the Tenant")
}

// finalizerOwners lists, as "manager operation", the field managers of t that own the
// manager's finalizer.
func finalizerOwners(t *testing.T, o metav1.Object) []string {
	t.Helper()
	var owners []string
	for _, mf := range o.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Finalizers map[string]json.RawMessage `json:"f:finalizers"`
			} `json:"f:metadata"`
		}
		require.NoError(t, json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields))
		if _, ok := fields.Metadata.Finalizers[`v:"`+wire.TenantFinalizer+`"`]; ok {
			owners = append(owners, mf.Manager+" "+string(mf.Operation))
		}
	}
	return owners
}
