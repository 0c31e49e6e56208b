package handshake

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestErrorsNameTheirSide checks the one way errors name a side.
func TestErrorsNameTheirSide(t *testing.T) {
	cause := errors.New("cause")
	for _, tc := range []struct {
		scope, want string
	}{
		{Local, "(local) doing: cause"},
		{Remote, "(remote) doing: cause"},
		{"", "doing: cause"},
	} {
		err := (&Side{Scope: tc.scope}).Errorf("doing: %w", cause)
		assert.EqualError(t, err, tc.want)
		assert.ErrorIs(t, err, cause, "the cause stays wrapped")
		assert.EqualError(t, ScopedErrorf(tc.scope, "doing: %w", cause), tc.want)
	}
}
