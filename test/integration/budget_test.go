package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/liqo-auth/liqo-auth/pkg/testenv"
)

// TestHandshakeRequestBudget holds one liqoctl authenticate to its request budget on each
// side: what the consumer's and the provider's API servers served (requests by verb and
// resource, watch events sent by resource, from their own metrics) between the moment
// before the command and the moment both fell quiet after it, with the controllers
// in-process and with a liqo-auth-manager on each cluster. Counts, not times: a change
// that asks one more thing of an API server fails here until handshakeBudget is raised,
// in the same commit, with its reason.
func TestHandshakeRequestBudget(t *testing.T) {
	for _, mode := range []string{budgetInProcess, budgetManagers} {
		t.Run(mode, func(t *testing.T) {
			consumer, provider := cliSites(t)
			if mode == budgetManagers {
				startManager(t, consumer)
				startManager(t, provider)
			}
			sides := map[string]*site{"consumer": consumer, "provider": provider}
			before := quietCounters(t, sides, mode)
			mustCLI(t, pairArgs("authenticate", consumer, provider)...)
			after := quietCounters(t, sides, mode)
			for _, name := range []string{"consumer", "provider"} {
				used := after[name].Since(before[name])
				t.Logf("%s, %s side: %s", mode, name, describeCounters(used))
			}
		})
	}
}

const (
	budgetInProcess = "in-process"
	budgetManagers  = "managers"
)

// budgeted says whether counter key counts in mode: with managers, their leader-election
// Leases are renewed every few seconds whatever happens, so Leases are not counted there.
func budgeted(mode, key string) bool {
	return mode != budgetManagers || !strings.HasSuffix(key, " leases")
}

// quietCounters reads the counters of each side once two readings 300 ms apart agree
// (everything the command set off is done), counting only what mode budgets.
func quietCounters(t *testing.T, sides map[string]*site, mode string) map[string]testenv.APICounters {
	t.Helper()
	ctx := context.Background()
	read := func() map[string]testenv.APICounters {
		out := map[string]testenv.APICounters{}
		for name, s := range sides {
			c, err := testenv.ReadAPICounters(ctx, s.cp.Config)
			require.NoError(t, err)
			maps.DeleteFunc(c, func(k string, _ float64) bool { return !budgeted(mode, k) })
			out[name] = c
		}
		return out
	}
	last := read()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		next := read()
		if maps.EqualFunc(last, next, func(a, b testenv.APICounters) bool { return maps.Equal(a, b) }) {
			return next
		}
		last = next
	}
	t.Fatal("the API servers did not fall quiet within 20s")
	return nil
}

// describeCounters lists counters one per line, sorted.
func describeCounters(c testenv.APICounters) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, "\n\t%q: %v,", k, c[k])
	}
	return b.String()
}
