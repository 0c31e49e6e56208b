package authmanager

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// selfReviewer asks the API server who the client is: the manager, or liqoctl running the
// provider's controllers in-process, which must know its own user to tell it from a
// consumer's.
func selfReviewer(ctx context.Context, c client.Client) (authenticationv1.UserInfo, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("asking the API server who this manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo, nil
}
