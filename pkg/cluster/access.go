package cluster

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AllowedActions asks the API server, with SubjectAccessReviews, which of the actions
// granted by rules a user in groups may still perform in namespace ns. It returns them as
// "verb group/resource[/name]"; an empty result proves that every one is denied.
func AllowedActions(ctx context.Context, c client.Client, user string, groups []string, ns string, rules []rbacv1.PolicyRule) ([]string, error) {
	var allowed []string
	for _, rule := range rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range rule.Verbs {
					for _, name := range names {
						sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
							User: user, Groups: groups,
							ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group,
								Resource: resource, Subresource: sub, Name: name},
						}}
						if err := c.Create(ctx, sar); err != nil {
							return nil, fmt.Errorf("asking the API server whether %s may %s %s: %w", user, verb, res, err)
						}
						if sar.Status.Allowed {
							allowed = append(allowed, strings.TrimSuffix(fmt.Sprintf("%s %s/%s/%s", verb, group, res, name), "/"))
						}
					}
				}
			}
		}
	}
	return allowed, nil
}
