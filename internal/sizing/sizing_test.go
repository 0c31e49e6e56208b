package sizing

import "testing"

func TestFleet(t *testing.T) {
	const mib, kib = 1 << 20, 1 << 10
	for _, tc := range []struct {
		name              string
		limit             int64
		idle, perConsumer float64
		want              int
	}{
		// 320Mi: Go's limit 288 MiB, the live heap under 244.8 MiB; 4 MiB idle leaves
		// 240.8 MiB, 11,522 consumers of 21.4 KiB (the Xeon's run of 1000, 2026-11-28).
		{"the release manifest at 21.4 KiB each", 320 * mib, 4 * mib, 21.4 * kib, 11522},
		{"256Mi at 20 KiB each: 191.84 MiB of room", 256 * mib, 4 * mib, 20 * kib, 9822},
		{"no growth measured", 320 * mib, 4 * mib, 0, 0},
		{"a heap that shrank", 320 * mib, 4 * mib, -1, 0},
		{"the idle heap alone past the limit", 4 * mib, 8 * mib, kib, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fleet(tc.limit, tc.idle, tc.perConsumer); got != tc.want {
				t.Fatalf("Fleet(%d, %.0f, %.0f) = %d, want %d", tc.limit, tc.idle, tc.perConsumer, got, tc.want)
			}
		})
	}
	if got, want := ManagerFleet(4*mib, 21.4*kib), Fleet(320*mib, 4*mib, 21.4*kib); got != want {
		t.Fatalf("ManagerFleet = %d, want Fleet under 320Mi = %d", got, want)
	}
}
