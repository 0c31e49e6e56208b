package handshake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// retirementOrder is the order in which a peering user deletes its own objects, each
// allowed by a grant still in force when it is deleted: each namespace's RoleBinding
// deletes itself through its Role, which its ClusterRole then deletes; the
// ClusterRoleBinding deletes itself last. Interrupted anywhere, what is left is unbound
// Roles (which grant nothing) and, at the end, the unbound ClusterRole: never a binding
// whose Role is gone, which a later Role of the same name would revive.
func retirementOrder(liqoNS, consumerID string) []client.Object {
	name := wire.PeeringUserClusterObjectName(consumerID)
	var objs []client.Object
	for _, ns := range []string{wire.TenantNamespaceName(consumerID), liqoNS} {
		objs = append(objs,
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	return append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// RetirePeeringUser retires the peering user whose credentials pr holds (DetectPeeringUser
// found one; otherwise an error): the peering user deletes its own bindings and Roles by
// name (access.PeeringUserClusterRules says which grant deletes which, and in which order),
// leaving only its ClusterRole, unbound; then it proves, with SelfSubjectAccessReviews made
// with its own certificate, that none of access.PeeringUserRules is allowed any more. A
// peering user already retired proves it again: its deletes are then refused or find
// nothing, which is no error.
func RetirePeeringUser(ctx context.Context, pr *Side) error {
	pu := pr.peeringUser
	if pu == nil {
		return pr.Errorf("these credentials are not a peering user's (no client certificate for a %s... user): there is no peering user to retire", wire.PeeringUserPrefix)
	}
	consumerID := pu.consumer()
	var deleted, refused []string
	for _, obj := range retirementOrder(pr.Namespace, consumerID) {
		what := fmt.Sprintf("%s %s", kindOf(obj), obj.GetName())
		if obj.GetNamespace() != "" {
			what += " in " + obj.GetNamespace()
		}
		switch err := pr.Client.Delete(ctx, obj); {
		case err == nil:
			deleted = append(deleted, what)
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			// Its grant is gone already (a re-run, or removed by the provider): the proof
			// below decides.
			refused = append(refused, what)
		default:
			return pr.Explain(err, "deleting "+what)
		}
	}
	if len(deleted) > 0 {
		pr.Report.Info("Peering user %s deleted its %s", pu.User, strings.Join(deleted, ", "))
	} else {
		pr.Report.Info("Peering user %s had no binding left to delete: proving it is retired", pu.User)
	}
	if len(refused) > 0 && len(deleted) > 0 {
		pr.Report.Info("Not deleted (no grant left for it): %s", strings.Join(refused, ", "))
	}
	// Its bindings were deleted a moment ago: the authorizer may not have seen it yet.
	left, err := revocation.Settled(ctx, revocation.AuthorizerLag, func(ctx context.Context) ([]string, error) {
		return peeringUserSelfAllowed(ctx, pr, consumerID)
	})
	if err != nil {
		return pr.Explain(err, "proving the retirement of peering user "+pu.User)
	}
	if len(left) > 0 {
		return pr.Errorf("%w: peering user %s may still: %s. Grants other than its own (older releases named them %s) are the provider administrator's to remove: liqoctl delete peering-user --consumer-cluster-id %s",
			ErrAccessNotRevoked, pu.User, strings.Join(left, "; "), wire.PeeringUserObjectName, consumerID)
	}
	validity := "it authorizes nothing"
	if time.Now().Before(pu.NotAfter) {
		validity = "its certificate stays cryptographically valid until " + pu.NotAfter.UTC().Format(time.RFC3339) + " but authorizes nothing"
	}
	pr.Report.Info("Peering user %s retired: verified with its own certificate, %s; its ClusterRole %s is left, unbound, granting nothing; a new peering user gets another name and never revives it",
		pu.User, validity, wire.PeeringUserClusterObjectName(consumerID))
	return nil
}

// peeringUserSelfAllowed asks, as the peering user (SelfSubjectAccessReviews, which every
// authenticated user may ask), which of its former permissions it still holds, each in
// the namespace it was granted in and in every namespace.
func peeringUserSelfAllowed(ctx context.Context, pr *Side, consumerID string) ([]string, error) {
	var left []string
	for ns, rules := range access.PeeringUserRules(pr.Namespace, consumerID) {
		allowed, err := selfAllowed(ctx, pr.Config, ns, rules)
		if err != nil {
			return nil, err
		}
		left = append(left, allowed...)
	}
	slices.Sort(left)
	return slices.Compact(left), nil
}

// kindOf names the kind of an RBAC object for a report.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.ClusterRoleBinding:
		return "ClusterRoleBinding"
	case *rbacv1.ClusterRole:
		return "ClusterRole"
	}
	return fmt.Sprintf("%T", obj)
}

// peeringUserRetired says whether the recorded peering user u authorizes nothing of what a
// peering user is granted (SubjectAccessReviews, asked by the provider's administrator):
// it retired itself, or its grants were removed. Such a peering user counts as gone.
func peeringUserRetired(ctx context.Context, p *Side, u PeeringUser) (bool, error) {
	left, err := peeringUserAllowed(ctx, p, u.User, u.ConsumerID)
	return len(left) == 0, err
}

// peeringUserAllowed is what peering user user of consumerID may still do of a peering
// user's permissions, each where it was granted (SubjectAccessReviews asked with p's
// credentials).
func peeringUserAllowed(ctx context.Context, p *Side, user, consumerID string) ([]string, error) {
	var left []string
	for ns, rules := range access.PeeringUserRules(p.Namespace, consumerID) {
		allowed, err := revocation.AllowedActions(ctx, p.Client, user, revocation.RevocationGroups(), ns, rules)
		if err != nil {
			return nil, err
		}
		left = append(left, allowed...)
	}
	return left, nil
}
