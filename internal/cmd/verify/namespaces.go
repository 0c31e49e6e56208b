package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// CheckEveryNamespace is the name of the check that the identity holds nothing in any
// namespace but its tenant namespace.
const CheckEveryNamespace = "every-namespace"

// everyNamespace checks, with the provider's own credentials, that nothing grants the
// consumer's user or group anything outside its tenant namespace, in any namespace.
//
// The identity cannot check this itself: it may not list namespaces or bindings, and a
// RoleBinding in namespace X shows only in a review of X (a SubjectAccessReview for
// namespace "" is answered from ClusterRoleBindings alone, not "in some namespace"). A
// review per namespace would be a round trip per namespace. So the provider's bindings
// are read instead: every RoleBinding (all namespaces, one list) and ClusterRoleBinding
// naming the user or group liqo.io, besides those in the tenant namespace (which the
// permissions check compares with the tenant role), plus SubjectAccessReviews for a few
// powerful actions, which catch authorizers other than RBAC: a constant number of
// requests whatever the number of namespaces. This is the scan the provider's manager
// runs before it issues a certificate (revocation.UnexpectedPermissions).
func (v verifier) everyNamespace(ctx context.Context, p peer, provider *handshake.Side, consumerID, identityTN string) {
	if provider == nil {
		p.add(CheckEveryNamespace, ResultSkip, "not checked: a RoleBinding in another namespace is visible only to the provider's credentials (the identity may not list namespaces or bindings): run verify with --remote-kubeconfig of the provider")
		return
	}
	if provider.Controllers().Liqo() {
		p.add(CheckEveryNamespace, ResultSkip, "Liqo's controllers run on the provider: Liqo binds its own roles")
		return
	}
	tn, err := provider.TenantNamespace(ctx, consumerID)
	if err != nil {
		tn = identityTN
	}
	own := func(b revocation.Binding) bool { return b.Kind == "RoleBinding" && b.Namespace == tn }
	groups := []string{wire.UserGroup}
	// A key-bound identity authenticates with its key group too: every key group the
	// provider's record lists for the consumer is scanned (credentials that may not read
	// the record scan the user and liqo.io only).
	if rec, recErr := cluster.GetTenantRecord(ctx, provider.Client, provider.Namespace, consumerID); recErr == nil {
		groups = append(groups, rec.ControlPlaneKeyGroups()...)
	}
	found, err := revocation.UnexpectedPermissions(ctx, provider.Client, consumerID, groups, own)
	switch {
	case apierrors.IsForbidden(err):
		p.add(CheckEveryNamespace, ResultSkip, "not checked: the provider's credentials may not list RoleBindings and ClusterRoleBindings in every namespace or ask SubjectAccessReviews (%v)", err)
	case err != nil:
		p.add(CheckEveryNamespace, ResultFail, "scanning the provider's bindings: %v", err)
	case len(found) > 0:
		p.add(CheckEveryNamespace, ResultFail, "%d grant(s) outside %s, likely a namespace owner or administrator binding user %q or group %q: %s", len(found), tn, consumerID, wire.UserGroup, strings.Join(found, "; "))
	default:
		p.add(CheckEveryNamespace, ResultPass, "%s", fmt.Sprintf("no RoleBinding in any namespace but %s and no ClusterRoleBinding names user %q or group %q; no powerful action allowed beyond every user's (binding scan and SubjectAccessReviews, with the provider's credentials)", tn, consumerID, wire.UserGroup))
	}
}

// summaryItems is how many items a table cell lists before it summarizes.
const summaryItems = 3

// permissionsSummary is the table's line for a permissions check that failed: counts, a
// few items, and the likely cause.
func permissionsSummary(tn string, want int, missing, extra []string) string {
	if len(missing)+len(extra) <= summaryItems {
		return ""
	}
	cause := "the tenant role differs: the provider runs another version of liqo-auth, or its administrator changed the role"
	switch {
	case len(extra) == 0:
		cause = "the tenant's access is not granted: a RoleBinding of the tenant in " + tn + " is gone (tenant drained or unauthenticated, or removed by hand; the provider's manager puts it back when it runs)"
	case len(missing) == 0:
		cause = "a RoleBinding in " + tn + " grants more than the tenant role"
	}
	return fmt.Sprintf("in %s, %d missing, %d extra of the tenant role's %d permissions (%s): likely %s; -o json lists each", tn, len(missing), len(extra), want, firstItems(append(slices.Clone(missing), extra...)), cause)
}

// firstItems lists the first few items, and how many more there are.
func firstItems(l []string) string {
	if len(l) <= summaryItems {
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(l[:summaryItems], ", "), len(l)-summaryItems)
}
