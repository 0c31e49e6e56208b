package revocation

import (
	"context"
	"time"
)

// AuthorizerLag bounds how long a proof of revocation asks again before it reports what
// is still allowed. The API server's RBAC authorizer reads bindings from its own informers,
// which see a deletion some time after the DELETE returned (milliseconds; under load, more):
// a SubjectAccessReview asked right after it may still be allowed by a binding that is gone,
// and a cache may still list it. A grant that stays is reported once this has passed.
const AuthorizerLag = 3 * time.Second

// Settled runs prove until it finds nothing left or within has passed, and returns its
// last answer: a proof asked right after the deletions it checks waits for the authorizer
// to see them instead of reporting a grant that is gone (AuthorizerLag). The window counts
// from the first answer. An error ends it at once; so does ctx, with its error: a proof cut
// short proves nothing either way.
func Settled[T any](ctx context.Context, within time.Duration, prove func(context.Context) ([]T, error)) ([]T, error) {
	left, err := prove(ctx)
	deadline := time.Now().Add(within)
	for pause := 25 * time.Millisecond; err == nil && len(left) > 0 && time.Now().Before(deadline); pause = min(2*pause, 400*time.Millisecond) {
		select {
		case <-ctx.Done():
			return left, ctx.Err()
		case <-time.After(min(pause, time.Until(deadline))):
		}
		left, err = prove(ctx)
	}
	return left, err
}
