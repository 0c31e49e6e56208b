package handshake

import (
	"context"
	"errors"
	"time"
)

// ErrApprovalPending means the provider accepted the handshake and waits for its
// administrator to approve this consumer (liqoctl approve tenant).
var ErrApprovalPending = errors.New("approval pending")

// ErrDenied means the provider's administrator denied this consumer.
var ErrDenied = errors.New("denied by the provider's administrator")

// RetirePeeringUser is a placeholder until the retire branch lands.
func RetirePeeringUser(ctx context.Context, pr *Side) error { return errors.New("not yet") }

// Leave is a placeholder until the retire branch lands.
func Leave(ctx context.Context, c *Side, providerID string, now time.Time) error {
	return errors.New("not yet")
}
