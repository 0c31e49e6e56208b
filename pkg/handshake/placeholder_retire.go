package handshake

import (
	"context"
	"errors"
	"time"
)

// RetirePeeringUser is a placeholder until the retire branch lands.
func RetirePeeringUser(ctx context.Context, pr *Side) error { return errors.New("not yet") }

// Leave is a placeholder until the retire branch lands.
func Leave(ctx context.Context, c *Side, providerID string, now time.Time) error { return errors.New("not yet") }
