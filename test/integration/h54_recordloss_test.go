package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestH54CopyMadeButNotRecorded: many slices are asked at once (the consumer's 16
// workers each write the one tenant record after their Create: conflicts, read again
// through a lagging cache, 5 tries); the provider's update-only slice writer strips the
// replicated label of every copy as soon as it sees it (harmless for a recorded copy).
// A copy made whose UID the record failed to keep is, after the strip and the
// provider's finalize, nobody's: the slice says NameTaken, and its deletion leaves it.
// What must hold: every copy made on the provider is recorded, or deleted with its slice.
func TestH54CopyMadeButNotRecorded(t *testing.T) {
	t.Parallel()
	c, p := cliSites(t)
	ctx := context.Background()
	peerForSlices(t, c, p)
	pTN, cTN := wire.TenantNamespaceName(c.id), wire.TenantNamespaceName(p.id)
	pw := principal(t, p, "h54-p-slice-updater", pTN, rule(authv1beta1.GroupVersion.Group, "resourceslices", "get", "list", "update"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var l authv1beta1.ResourceSliceList
			if pw.List(ctx, &l, client.InNamespace(pTN)) == nil {
				for i := range l.Items {
					if l.Items[i].Labels[wire.ReplicationStatusLabel] == "true" {
						cp := l.Items[i]
						delete(cp.Labels, wire.ReplicationStatusLabel)
						_ = pw.Update(ctx, &cp)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	const n = 60
	var cwg sync.WaitGroup
	for i := range n {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			_ = c.client.Create(ctx, localSlice(c, p, fmt.Sprintf("h54-s%02d", i), "", "10m"))
		}()
	}
	cwg.Wait()
	time.Sleep(20 * time.Second)

	rec, err := cluster.GetTenantRecord(ctx, c.client, wire.DefaultLiqoNamespace, p.id)
	require.NoError(t, err)
	var l authv1beta1.ResourceSliceList
	require.NoError(t, p.client.List(ctx, &l, client.InNamespace(pTN)))
	var lost []string
	uids := map[string]types.UID{}
	for _, cp := range l.Items {
		uids[cp.Name] = cp.UID
		// A copy being deleted is not left: one whose record failed is deleted again (and
		// the provider may still be finalizing it).
		if cp.DeletionTimestamp == nil && rec.SliceCopies[cp.Name] != cp.UID {
			lost = append(lost, cp.Name)
		}
	}
	t.Logf("%d copies on the provider, %d recorded; not recorded: %v", len(l.Items), len(rec.SliceCopies), lost)
	if len(lost) == 0 {
		return
	}
	name := lost[0]
	var evs eventsv1.EventList
	require.NoError(t, c.client.List(ctx, &evs, client.InNamespace(cTN)))
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			t.Logf("event on %s: %s %s: %s", name, e.Type, e.Reason, e.Note)
		}
	}
	t.Logf("before the teardown: %s", a73CopyState(t, c, p, name))
	errOut, took, err := a74Run(t, "delete", "resourceslice", name, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id)
	t.Logf("delete resourceslice %s (took %v): %v\n%s", name, took, err, errOut)
	t.Logf("after the teardown: %s", a73CopyState(t, c, p, name))
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	wg.Add(1)
	go wg.Done()
	require.NoError(t, h52Relabel(ctx, pw, client.ObjectKey{Namespace: pTN, Name: name}, "true"))
	user := authn.SliceUserName(name, c.id)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if b := a74BindingsOf(t, p, pTN, user); len(b) > 0 {
			t.Errorf("BROKEN: copy %s (UID %s) was made by the consumer but never recorded; deleted slice, copy left, relabelled: %s granted again: %v", name, uids[name], user, b)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("copy %s was made but not recorded (its deletion left it), though no grant came back", name)
}
