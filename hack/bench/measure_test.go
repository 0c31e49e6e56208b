package main

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	for _, tc := range []struct {
		name   string
		sample []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, .5, 0},
		{"one", ms(7), .95, 7 * time.Millisecond},
		{"median of odd, unsorted", ms(30, 10, 20), .5, 20 * time.Millisecond},
		{"median of even is the lower middle", ms(40, 10, 30, 20), .5, 20 * time.Millisecond},
		{"p95 of 20 is the 19th", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), .95, 19 * time.Millisecond},
		{"max", ms(3, 1, 2), 1, 3 * time.Millisecond},
		{"min", ms(3, 1, 2), 0, 1 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]time.Duration(nil), tc.sample...)
			if got := percentile(tc.sample, tc.p); got != tc.want {
				t.Fatalf("percentile(%v, %v) = %v, want %v", tc.sample, tc.p, got, tc.want)
			}
			for i := range before {
				if before[i] != tc.sample[i] {
					t.Fatalf("percentile reordered its input: %v", tc.sample)
				}
			}
		})
	}
}
