package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

// oldSliceUsers is SliceUsers as it was before the indexed lookup (491b16d^).
func oldSliceUsers(ctx context.Context, c client.Reader, liqoNS string, now time.Time) (map[string]string, error) {
	out := map[string]string{}
	records, err := ListTenantRecords(ctx, c, liqoNS)
	if err != nil {
		return nil, err
	}
	for _, rec := range records {
		for _, cert := range rec.Valid(now) {
			if cert.Slice != "" {
				out[authn.SliceUserName(cert.Slice, rec.RemoteID)] = fmt.Sprintf("certificate %s of ResourceSlice %s of cluster %q", cert.Serial, cert.Slice, rec.RemoteID)
			}
		}
	}
	var slices authv1beta1.ResourceSliceList
	if err := c.List(ctx, &slices, client.MatchingLabels{wire.ReplicationStatusLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	for _, rs := range slices.Items {
		consumer := rs.Labels[wire.RemoteClusterIDLabel]
		if rs.Spec.ConsumerClusterID != nil {
			consumer = string(*rs.Spec.ConsumerClusterID)
		}
		out[authn.SliceUserName(rs.Name, consumer)] = fmt.Sprintf("the identity of ResourceSlice %s/%s", rs.Namespace, rs.Name)
	}
	return out, nil
}

// collectingIndexer records what IndexSliceUsers registers, for a fake client.
type collectingIndexer struct{ b *fake.ClientBuilder }

func (c collectingIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	c.b.WithIndex(obj, field, fn)
	return nil
}

// TestSliceUserAgreesWithTheFullScan compares the indexed lookup with the full scan it
// replaced, on random tenant records and ResourceSlices (misplaced, mislabelled, expired,
// unreadable, with another consumer in their spec than in their label): the same cluster
// IDs are refused.
func TestSliceUserAgreesWithTheFullScan(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	const liqoNS = "liqo"
	ids := []string{"cl-a", "cl-b", "cl-c", ""}
	sliceNames := []string{"gpu", "tpu", "cpu"}
	stats := map[string]int{}
	defer func() { t.Logf("cases: %v", stats) }()
	for seed := int64(0); seed < 500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		pick := func(s []string) string { return s[rng.Intn(len(s))] }
		var objs []client.Object
		nRec := rng.Intn(4)
		for i := 0; i < nRec; i++ {
			id := pick(ids)
			ns := liqoNS
			if rng.Intn(5) == 0 {
				ns = "elsewhere"
			}
			name := wire.TenantRecordName(id)
			if rng.Intn(6) == 0 {
				name = wire.TenantRecordName(pick(ids)) + "x"
			}
			labels := map[string]string{wire.TenantRecordLabel: "true", wire.RemoteClusterIDLabel: id}
			if rng.Intn(6) == 0 {
				labels[wire.TenantRecordLabel] = "false"
			}
			if id == "" && rng.Intn(2) == 0 {
				delete(labels, wire.RemoteClusterIDLabel)
			}
			var certs []IssuedCertificate
			for j := rng.Intn(4); j > 0; j-- {
				c := IssuedCertificate{Serial: fmt.Sprint(j), NotAfter: now.Add(time.Duration(rng.Intn(3)-1) * time.Hour)}
				if rng.Intn(4) != 0 {
					c.Slice = pick(sliceNames)
				}
				if rng.Intn(8) == 0 {
					c.NotAfter = now // expired exactly at now
				}
				certs = append(certs, c)
			}
			b, _ := json.Marshal(certs)
			data := map[string]string{recordCertsKey: string(b)}
			if rng.Intn(10) == 0 {
				data[recordCertsKey] = "{not json"
			}
			if rng.Intn(15) == 0 {
				data[recordNonceKey] = "[1]"
			}
			objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + fmt.Sprint("-", i)[0:0], Labels: labels}, Data: data})
		}
		nSl := rng.Intn(4)
		for i := 0; i < nSl; i++ {
			labels := map[string]string{}
			if rng.Intn(4) != 0 {
				labels[wire.ReplicationStatusLabel] = "true"
			} else if rng.Intn(2) == 0 {
				labels[wire.ReplicationStatusLabel] = "false"
			}
			if rng.Intn(3) != 0 {
				labels[wire.RemoteClusterIDLabel] = pick(ids)
			}
			rs := &authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns-", rng.Intn(3)), Name: pick(sliceNames), Labels: labels}}
			if rng.Intn(2) == 0 {
				c := authv1beta1.ClusterID(pick(ids))
				rs.Spec.ConsumerClusterID = &c
			}
			objs = append(objs, rs)
		}
		objs = dedupe(objs)
		b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...)
		require.NoError(t, IndexSliceUsers(ctx, collectingIndexer{b}))
		c := b.Build()

		old, oldErr := oldSliceUsers(ctx, c, liqoNS, now)
		candidates := map[string]bool{"nobody": true}
		for _, s := range sliceNames {
			for _, id := range ids {
				candidates[authn.SliceUserName(s, id)] = true
			}
		}
		for user := range candidates {
			got, err := SliceUser(ctx, c, liqoNS, user, now)
			_, inOld := old[user]
			oldBlocks := oldErr != nil || inOld
			newBlocks := err != nil || got != ""
			stats[fmt.Sprintf("oldErr=%v inOld=%v newErr=%v got=%q", oldErr != nil, inOld, err != nil, kind(got))]++
			require.Equal(t, oldBlocks, newBlocks, "seed %d user %s: old %v err %v, new %q err %v", seed, user, inOld, oldErr, got, err)
			if oldErr == nil {
				require.NoError(t, err, "seed %d", seed)
				// Several matches: the old map kept the last, the new answer the first; the kind
				// (slice before certificate) must agree.
				require.Equal(t, kind(old[user]), kind(got), "seed %d user %s: %q vs %q", seed, user, old[user], got)
			} else if err == nil {
				// New answers a refusal where the old errored: only when a slice matches.
				require.Contains(t, got, "the identity of ResourceSlice", "seed %d", seed)
			}
		}
	}
}

func dedupe(objs []client.Object) []client.Object {
	seen := map[string]bool{}
	var out []client.Object
	for _, o := range objs {
		k := fmt.Sprintf("%T/%s/%s", o, o.GetNamespace(), o.GetName())
		if !seen[k] {
			seen[k] = true
			out = append(out, o)
		}
	}
	return out
}

func kind(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
