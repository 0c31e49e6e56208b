package authmanager

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionSkew(t *testing.T) {
	for _, tc := range []struct {
		mine, manager string
		skew          bool
	}{
		{"v1.2.3", "v1.2.3", false},
		{"v1.2.3", "v1.2.4", true},
		{"v1.2.3+meta", "v1.2.3_meta", false},
		{"dev", "v1.2.3", false},
		{"v1.2.3", "dev", false},
		{"v1.2.3", "", false},
	} {
		got := VersionSkew(tc.mine, tc.manager)
		assert.Equal(t, tc.skew, got != "", "%s vs %s: %q", tc.mine, tc.manager, got)
		if tc.skew {
			assert.Contains(t, got, "liqoctl install --with-manager")
		}
	}
}
