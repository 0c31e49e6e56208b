package peergc

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLastSignOfLife(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(d)); return &m }
	for _, tc := range []struct {
		name             string
		created          time.Duration
		acquire, renewed *metav1.MicroTime
		want             time.Duration
	}{
		{"never renewed: its creation", -time.Hour, nil, nil, -time.Hour},
		{"renewed since", -time.Hour, nil, at(-time.Minute), -time.Minute},
		{"a renewal back-dated before the creation counts for nothing", -time.Hour, nil, at(-48 * time.Hour), -time.Hour},
		{"given to a new Tenant", -48 * time.Hour, at(-time.Minute), nil, -time.Minute},
		{"a clock a little ahead: now", -time.Hour, nil, at(5 * time.Minute), 0},
		{"a renewal stamped far in the future: now, never a collection", -time.Hour, nil, at(1000 * 24 * time.Hour), 0},
	} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(tc.created))},
			Spec: coordinationv1.LeaseSpec{AcquireTime: tc.acquire, RenewTime: tc.renewed}}
		if got := LastSignOfLife(lease, now); !got.Equal(now.Add(tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.name, got, now.Add(tc.want))
		}
	}
}
