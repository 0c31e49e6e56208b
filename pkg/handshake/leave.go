package handshake

import (
	"context"
	"errors"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// ErrCannotLeave means the consumer cannot leave its provider by itself: the provider does
// not let its identity delete its Tenant, or the consumer holds no credential valid now.
var ErrCannotLeave = errors.New("cannot leave by itself")

// Leave is consumer c leaving provider providerID with the only credential it holds there:
// its own control-plane Identity (the certificate IdentityCredential builds from it; never
// the kubeconfig Secret, nor any credential of the provider's administrator). A consumer
// leaving is its own right: the provider's tenant reader Role lets its user, and no one
// else's, delete its own Tenant, by name (access.TenantReaderRules). Leave
//
//   - deletes, first, the consumer's ResourceSlices asked of that provider, each with the
//     proof that its identity lost its access (DeleteSlices: c's consumer controllers,
//     liqo-auth-manager's or liqoctl's in-process ones, remove each copy on the provider);
//   - deletes its Tenant on the provider with its identity, and waits (a watch) until the
//     Tenant is gone, or reading it is refused because the provider's finalizer removed the
//     reader binding;
//   - proves, with SelfSubjectAccessReviews made with its own certificate, that none of
//     access.RevocationRules remains, in its tenant namespace there or anywhere;
//   - then removes the Identity, its kubeconfig and the signed nonce (RemoveIdentity).
//
// With no Identity it says there is nothing to leave; with an Identity but no certificate
// valid now, or a provider that refuses the deletion (Liqo's controllers, or a liqo-auth
// without this right), it returns ErrCannotLeave naming what the provider's administrator
// runs there.
func Leave(ctx context.Context, c *Side, providerID string, now time.Time) error {
	if err := c.identified(ctx); err != nil {
		return err
	}
	byAdmin := "its administrator runs there: liqoctl unauthenticate --remote-cluster-id " + c.ClusterID
	cTN, err := tenantNamespaceOrDefault(ctx, c, providerID)
	if err != nil {
		return err
	}
	var id authv1beta1.Identity
	switch err = c.Client.Get(ctx, client.ObjectKey{Namespace: cTN, Name: wire.IdentityName(providerID)}, &id); {
	case apierrors.IsNotFound(err):
		c.Report.Info("No Identity on provider %q: nothing to leave (if that provider still holds a Tenant for this cluster, %s)", providerID, byAdmin)
		return nil
	case err != nil:
		return c.Explain(err, "reading the Identity on provider "+providerID)
	}
	cred, err := RevocationCredential(ctx, c, cTN, id.Name, providerID, nil, now)
	if err != nil {
		return err
	}
	if cred == nil {
		return c.Errorf("%w: Identity %s/%s holds no certificate valid now, the only credential this cluster has on provider %q; %s, then liqoctl unauthenticate --remote-cluster-id %s here cleans this cluster",
			ErrCannotLeave, cTN, id.Name, providerID, byAdmin, providerID)
	}
	pr, err := identitySide(c, cred, providerID)
	if err != nil {
		return err
	}
	pTN, err := ProviderNamespace(ctx, c, providerID, ptr.Deref(id.Spec.Namespace, ""))
	if err != nil {
		return err
	}
	// Asked before anything is deleted: a provider that does not grant it keeps the slices.
	may, err := selfAllowed(ctx, cred, pTN, []rbacv1.PolicyRule{{APIGroups: []string{authv1beta1.GroupVersion.Group}, Resources: []string{"tenants"},
		ResourceNames: []string{c.ClusterID}, Verbs: []string{"delete"}}})
	if err != nil {
		return pr.Explain(err, "asking whether this cluster may delete its Tenant")
	}
	if len(may) == 0 {
		return cannotDeleteTenant(pr, byAdmin)
	}
	// A slice deleted whose proof failed is said at the end: the Tenant still goes.
	slicesErr := leaveSlices(ctx, c, cTN, providerID)
	if slicesErr != nil && !OnlyProofsFailed(slicesErr) {
		return slicesErr
	}
	if err := leaveTenant(ctx, c, pr, cred, pTN, providerID, byAdmin); err != nil {
		return errors.Join(slicesErr, err)
	}
	return ProveSlicesAgain(ctx, c, slicesErr)
}

// leaveTenant deletes c's Tenant on provider pr (in pTN) with c's credential there, proves
// with it that nothing of the tenant's access remains, then removes c's Identity.
func leaveTenant(ctx context.Context, c, pr *Side, cred *rest.Config, pTN, providerID, byAdmin string) error {
	if deleteOwnTenantErr := deleteOwnTenant(ctx, pr, pTN, c.ClusterID, byAdmin); deleteOwnTenantErr != nil {
		return deleteOwnTenantErr
	}
	// The Tenant's finalize deleted its bindings a moment ago: the authorizer may not have
	// seen it yet.
	left, err := revocation.Settled(ctx, revocation.AuthorizerLag, func(ctx context.Context) ([]string, error) {
		return selfAllowed(ctx, cred, pTN, access.RevocationRules(c.ClusterID))
	})
	if err != nil {
		return pr.Explain(err, "verifying the revocation")
	}
	if len(left) > 0 {
		return pr.Errorf("%w: this cluster's identity (user %q) may still: %s; %s", ErrAccessNotRevoked, c.ClusterID, strings.Join(left, "; "), byAdmin)
	}
	c.Report.Info("Access on provider %q revoked: verified with this cluster's own certificate", providerID)
	return RemoveIdentity(ctx, c, providerID)
}

// leaveSlices deletes the consumer's slices asked of providerID, each with its proof.
func leaveSlices(ctx context.Context, c *Side, cTN, providerID string) error {
	slices, err := SlicesFor(ctx, c, providerID)
	if err != nil {
		return c.Explain(err, "listing the ResourceSlices asked of provider "+providerID)
	}
	names := make([]string, 0, len(slices))
	for _, rs := range slices {
		names = append(names, rs.Name)
	}
	if len(names) == 0 {
		return nil
	}
	c.Report.Info("Deleting the ResourceSlices asked of provider %q first: %s", providerID, strings.Join(names, ", "))
	return DeleteSlices(ctx, c, cTN, providerID, names...)
}

// identitySide is the provider as the consumer's own identity reaches it.
func identitySide(c *Side, cred *rest.Config, providerID string) (*Side, error) {
	sch := runtime.NewScheme()
	if err := authv1beta1.AddToScheme(sch); err != nil {
		return nil, err
	}
	pc, err := client.NewWithWatch(cred, client.Options{Scheme: sch})
	if err != nil {
		return nil, ScopedErrorf(Remote, "creating a client with this cluster's identity: %w", err)
	}
	return &Side{Scope: Remote, Client: pc, Config: cred, Namespace: c.Namespace, ClusterID: providerID, Report: c.Report}, nil
}

// cannotDeleteTenant is ErrCannotLeave from provider pr, which does not let this cluster's
// identity delete its Tenant; byAdmin says what its administrator runs instead.
func cannotDeleteTenant(pr *Side, byAdmin string) error {
	return pr.Errorf("%w: provider %q does not let this cluster's identity delete its Tenant (Liqo's controllers, or a liqo-auth release before a consumer's right to leave, grant it only reading it): %s",
		ErrCannotLeave, pr.ClusterID, byAdmin)
}

// deleteOwnTenant deletes, with the consumer's identity, its Tenant consumerID in pTN on
// provider pr, and waits until it is gone or its read is refused (the provider's finalizer
// removed the reader binding with the rest of its access).
func deleteOwnTenant(ctx context.Context, pr *Side, pTN, consumerID, byAdmin string) error {
	t := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: pTN, Name: consumerID}}
	switch err := pr.Client.Delete(ctx, t); {
	case apierrors.IsForbidden(err):
		return cannotDeleteTenant(pr, byAdmin)
	case apierrors.IsNotFound(err):
		pr.Report.Info("No Tenant of this cluster left on provider %q", pr.ClusterID)
	case err != nil:
		return pr.Explain(err, "deleting this cluster's Tenant")
	default:
		pr.Report.Info("Tenant %s/%s deleted on provider %q with this cluster's identity", pTN, consumerID, pr.ClusterID)
	}
	err := waitFor(ctx, pr.Client, client.ObjectKeyFromObject(t), &authv1beta1.TenantList{}, "the Tenant to be gone on the provider",
		func(t *authv1beta1.Tenant) (bool, string, error) {
			return t == nil, "the provider's controllers remove its access, then its finalizer", nil
		})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		pr.Report.Info("This cluster may no longer read its Tenant on provider %q: its access is being removed", pr.ClusterID)
	case err != nil:
		return pr.Explain(err, "waiting for this cluster's Tenant to be deleted")
	default:
		pr.Report.Info("Tenant gone on provider %q", pr.ClusterID)
	}
	return nil
}
