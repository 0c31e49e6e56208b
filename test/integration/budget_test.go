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
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// TestHandshakeRequestBudget holds one liqoctl authenticate to its request budget on each
// side: what the consumer's and the provider's API servers served (requests by verb and
// resource, watch events sent by resource, from their own metrics) between the moment
// before the command and the moment both fell quiet after it, with the controllers
// in-process and with a liqo-auth-manager on each cluster. Counts, not times: a change
// that asks one more thing of an API server fails here until handshakeBudget is raised,
// in the same commit, with its reason.
func TestHandshakeRequestBudget(t *testing.T) {
	// Serial: it counts requests, and kube-controller-manager's garbage collector asks more of them on a loaded machine.
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
				checkBudget(t, mode+", "+name+" side", used, handshakeBudget[mode][name])
			}
			if t.Failed() {
				logEvents(t, provider, wire.TenantNamespaceName(consumer.id))
				logEvents(t, consumer, wire.TenantNamespaceName(provider.id))
			}
		})
	}
}

// TestProviderBudgetFitsTheManagersRateLimit holds the provider's request budget to the
// manager's client limits, which bind per resource type: a handshake that asks more of one
// type than DefaultQPS / TargetHandshakeRate would make the limit, not the API server's
// CPU, what bounds a fleet's handshakes (as 5 SubjectAccessReviews under 200 a second
// did). The budget counts liqoctl's requests too: it over-counts the manager's.
func TestProviderBudgetFitsTheManagersRateLimit(t *testing.T) {
	t.Parallel()
	most := authmanager.DefaultQPS / authmanager.TargetHandshakeRate
	for k, n := range handshakeBudget[budgetManagers]["provider"] {
		if strings.HasPrefix(k, "request ") && !strings.HasPrefix(k, "request GET /") && n > float64(most) {
			t.Errorf("%q: %v per handshake; the manager's %v requests a second of one type admit %.0f handshakes a second, under its target of %v: raise authmanager.DefaultQPS with the budget, or ask less",
				k, n, authmanager.DefaultQPS, authmanager.DefaultQPS/n, authmanager.TargetHandshakeRate)
		}
	}
}

// watchSlack is how many watch events of one kind a handshake may send over its budget.
// How many events a write makes depends on how many watches are open when it lands, and
// the in-process controllers' informers (whose first state comes as watch events) start
// within the handshake: under load a write or two moves from before a watch's start to
// after it (seen: provider configmaps 9 for 8 with both cores busy). A widened cache scope
// of a populous kind costs tens of events, which this still catches; a new watcher of a
// kind with one or two objects (renews, peerings, resourceslices) costs one or two and is
// hidden by the slack; requests get no slack.
const watchSlack = 2

// checkBudget fails for every counter that gained more than budget allows (a counter the
// budget does not name allows nothing; a watch event kind allows watchSlack more), and
// says which ones gained less: the budget can come down.
func checkBudget(t *testing.T, where string, used, budget testenv.APICounters) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(used)) {
		allowed := budget[k]
		if strings.HasPrefix(k, "watch event ") && allowed > 0 {
			allowed += watchSlack
		}
		if used[k] > allowed {
			t.Errorf("%s: %q: %v in one handshake, over its budget of %v. A request more is a decision: if it is needed, raise handshakeBudget in the same commit and say why there", where, k, used[k], allowed)
		}
	}
	var under []string
	for _, k := range slices.Sorted(maps.Keys(budget)) {
		if used[k] < budget[k] {
			under = append(under, fmt.Sprintf("%q: %v of %v", k, used[k], budget[k]))
		}
	}
	if len(under) > 0 {
		t.Logf("%s: under budget (lower it if it stays there): %s", where, strings.Join(under, ", "))
	}
}

// handshakeBudget is the most one liqoctl authenticate may ask of each API server (fresh
// control planes, nothing else running), by mode and side. Requests are exact, except
// where a comment says which race adds one; watch events allow one more than seen where
// the moment liqoctl's own watch (of the Tenant, of the Identity) starts decides whether
// it sees a write, and checkBudget allows watchSlack more again under load.
var handshakeBudget = map[string]map[string]testenv.APICounters{
	budgetInProcess: {
		"consumer": {
			// No GET /api, /apis: liqoctl knows the built-in kinds it uses and asks only the
			// discovery document of the group versions it does not (/apis/<group>/<version>,
			// which these counters leave out), once per command.
			"request GET deployments": 1, // are Liqo's controllers there?
			// The cluster ID; the in-process scope's tenant records; the controllers' informer.
			// Each informer of the in-process controllers fills with a LIST (cli.ListingInformers),
			// not a watch whose initial events waited for etcd's next progress notification: one
			// LIST per watched kind, and the initial objects no longer counted as watch events.
			"request LIST configmaps": 3,
			"request LIST identities": 1, "request LIST namespaces": 1, "request LIST resourceslices": 1, "request LIST secrets": 1,
			// The tenant record: state (its CA pin kept from that read, not read again),
			// controllers' start.
			"request GET configmaps":  2,
			"request POST configmaps": 1, "request PUT configmaps": 1, // the record made, then the CA pinned
			// The cluster key; the signed nonce and the kubeconfig are created unread (none yet).
			"request GET secrets": 1, "request POST secrets": 2,
			"request GET leases":     1, // is a manager running?
			"request GET namespaces": 1, "request POST namespaces": 1,
			"request POST rolebindings": 1, // the in-process controllers' binding in the tenant namespace
			// kube-controller-manager's garbage collector, when its graph has not seen the
			// Identity yet but has seen the kubeconfig Secret it owns, reads that owner live
			// and again with backoff until its informer catches up (seen 8, then 9 in CI on
			// fd3f379, under load with other tests running; none when alone: its backoff, not
			// this project's requests). liqoctl's wait for the Identity's status starts from the
			// Identity it applied, without a read (one more before).
			"request GET identities": 9, "request APPLY identities": 1,
			// The kubeconfig Secret's event can bring the Identity back from a cache that has
			// not seen its status yet: that write loses the race (409).
			"request PUT identities/status": 2,
			"request POST events":           1,
			"watch event configmaps":        7, "watch event identities": 7, "watch event namespaces": 6,
			"watch event resourceslices": 1, "watch event rolebindings": 3,
			"watch event secrets": 8,
		},
		"provider": {
			"request GET deployments":         1,
			"request POST selfsubjectreviews": 1, // who the in-process controllers are
			// Each informer's first fill, as on the consumer.
			"request LIST configmaps":                 3,
			"request LIST certificatesigningrequests": 1, "request LIST clusterrolebindings": 1, "request LIST namespaces": 1,
			"request LIST renews": 1, "request LIST resourceslices": 1, "request LIST rolebindings": 1,
			"request LIST roles": 1, "request LIST secrets": 1, "request LIST tenants": 1,
			// The tenant record: state (read once, as the tenant namespace is ensured: 4 while
			// the state read it again), start, after the status. The tenant namespaces are
			// ensured as the state is read (5 while each step read them anew).
			"request GET configmaps":  3,
			"request POST configmaps": 1, "request PUT configmaps": 2, // nonce consumed; certificate recorded
			// The key; the nonce, created without a read first (none in a new tenant namespace)
			// and not marked once consumed (the tenant record says it). Up to 2 more when the
			// nonce reaches the controllers' cache before its tenant record: the cache keeps it
			// stripped of its content (CacheScope) until it changes, and a reconcile that reads
			// it meanwhile reads it live (liveWhenStripped). The scope keeps that live copy for
			// the version the cache holds, once it knows the record: the nonce creator's
			// reconcile on the record's event may read before the scope's own handler of that
			// event has run, the next read (the tenant controller's) keeps it, and later ones
			// read the copy. It was up to 4 more before the copy was kept (about one run of
			// four, in both modes, ninth session).
			"request GET secrets": secretReadsWhenStripped, "request POST secrets": 1,
			"request GET leases":     1,
			"request GET namespaces": 1, "request POST namespaces": 1,
			// No GET tenants: liqoctl's wait for the Tenant's status starts from the Tenant it
			// applied, without a read (one before).
			"request APPLY tenants": 1, "request PATCH tenants": 1, "request PUT tenants/status": 1,
			"request POST roles": 1, "request POST rolebindings": 3,
			"request POST subjectaccessreviews":               5, // the cluster ID holds nothing of its own
			"request POST certificatesigningrequests":         1,
			"request PUT certificatesigningrequests/approval": 1,
			"request PUT certificatesigningrequests/status":   1, // the signer
			"request DELETE certificatesigningrequests":       1,
			"request POST events":                             1,
			"watch event certificatesigningrequests":          11,
			"watch event clusterrolebindings":                 1, // 57 while the in-process cache's first fill was streamed
			"watch event configmaps":                          8, "watch event namespaces": 5, "watch event resourceslices": 2,
			"watch event rolebindings": 20, "watch event roles": 7, "watch event tenants": 7,
			"watch event secrets": 5, // 8 while the nonce was marked consumed
			"watch event renews":  1, // the Renew informer's watch bookmark, which may fall within the handshake: no Renew changes
		},
	},
	budgetManagers: {
		"consumer": {
			"request GET deployments": 1,
			"request LIST configmaps": 1,
			"request GET configmaps":  2, "request POST configmaps": 1, "request PUT configmaps": 1, // as in-process
			// The manager's identity controller reads the kubeconfig Secret live in each
			// reconcile that writes it (Secrets are not cached whole); the Identity's own
			// status update or the pin's record event, when it arrives after the first
			// reconcile, brings a second one (seen once in four loaded runs, 2026-11-29).
			"request GET secrets": 2, "request POST secrets": 2,
			"request GET namespaces": 1, "request POST namespaces": 1,
			"request POST rolebindings": 1,
			// The manager's renewal follower reads the Identity again while it retries its
			// first watch of the provider, seen up to 8 times; kube-controller-manager's
			// garbage collector may read it too while its graph lags (as in-process): 9 seen
			// in a loaded clean-clone run (2026-11-30, -parallel 3 on a slow machine), the
			// two backoffs together. liqoctl's wait reads none (as in-process).
			"request GET identities":        9,
			"request APPLY identities":      1,
			"request PUT identities/status": 2, // as in-process
			"request POST events":           1,
			"watch event configmaps":        6, "watch event identities": 7, "watch event namespaces": 5,
			"watch event renews": 2, "watch event rolebindings": 5, "watch event secrets": 8,
			// The Peering informer's watch bookmark (the manager carries out Peerings), which
			// may fall within the handshake: no Peering changes.
			"watch event peerings": 1,
		},
		"provider": {
			// No GET /api, /apis: the consumer's manager knows the kinds it uses with the new
			// identity (providerclient.New), as liqoctl does.
			// No SelfSubjectReview, no read of liqo-auth-config nor of the provider's key: liqoctl
			// reads them only to run the provider's controllers, once the Lease says no manager
			// runs (they were read beside the Lease until then).
			"request GET deployments": 1,
			"request LIST configmaps": 1,
			"request GET configmaps":  2, "request POST configmaps": 1, "request PUT configmaps": 2, // the record: state, after the status
			"request GET secrets": secretReadsWhenStripped - 1, "request POST secrets": 1, // the nonce's live reads, as in-process
			"request GET namespaces": 1, "request POST namespaces": 1,
			// One more status write and one more Event (below) were seen once, in a clean-clone
			// CI run under the suite's load (tenth session, 91f7514), and never in 15 runs alone,
			// with no more Secret reads. Not a placement or nonce refusal: both are confirmed by a
			// live read before they are made. Most likely the signer answered after the
			// reconcile's wait for it (issuer.DefaultSignerWait, 1 s) with both CPUs shared by
			// four tests' control planes: the Tenant is then written CertificatePending, with
			// its Event, and again with the certificate. The Events were not kept then; this
			// test now logs them when it fails. Lower both to 1 if that is not it.
			// No PATCH tenants: where a manager runs, liqoctl applies the Tenant with the
			// manager's finalizer (handshake.ApplyTenant), which the manager patched in before.
			// One GET tenants, the manager's; liqoctl's wait reads none (as in-process).
			"request GET tenants": 1, "request APPLY tenants": 1, "request PUT tenants/status": 2,
			"request POST roles": 1, "request POST rolebindings": 3,
			"request POST subjectaccessreviews":               5,
			"request POST certificatesigningrequests":         1,
			"request PUT certificatesigningrequests/approval": 1,
			"request PUT certificatesigningrequests/status":   1,
			"request DELETE certificatesigningrequests":       1,
			"request POST events":                             2, // see PUT tenants/status
			"watch event certificatesigningrequests":          10, "watch event configmaps": 8, "watch event namespaces": 5,
			"watch event renews": 2, "watch event rolebindings": 11, "watch event roles": 5,
			"watch event tenants":  5, // 7 while the manager patched its finalizer in
			"watch event secrets":  4, // 8 while the nonce was marked consumed
			"watch event peerings": 1, // as on the consumer: a bookmark
		},
	},
}

// secretReadsWhenStripped is the provider's budget of Secret reads (GET secrets) in one
// handshake: the key, and the live reads of a nonce the cache holds stripped (see the
// in-process provider's budget).
const secretReadsWhenStripped = 3

const (
	budgetInProcess = "in-process"
	budgetManagers  = "managers"
)

// budgeted says whether counter key counts in mode: Leases are renewed whatever happens,
// the managers' leader election every few seconds and, in every mode, the API server's own
// identity Lease (kube-system) every 10 s, which a handshake on a slow machine may straddle
// (a PUT and its watch events, seen once on a loaded 2-core run): with managers, Leases
// are not counted, in-process only their reads are (liqoctl's "is a manager running?").
// The API server's own OpenAPI aggregation (GET /openapi/...) never is.
func budgeted(mode, key string) bool {
	if strings.HasPrefix(key, "request GET /openapi") {
		return false
	}
	if !strings.HasSuffix(key, " leases") {
		return true
	}
	return mode != budgetManagers && strings.HasPrefix(key, "request GET ")
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

// logEvents logs the Events of namespace ns on s: what a handshake over its budget
// decided along the way (a refusal before an acceptance writes the status twice).
func logEvents(t *testing.T, s *site, ns string) {
	t.Helper()
	var evs eventsv1.EventList
	if err := s.client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Logf("Events of %s on %s: %v", ns, s.id, err)
		return
	}
	for _, e := range evs.Items {
		t.Logf("Event on %s: %s %s/%s %s: %s", s.id, e.CreationTimestamp.Format(time.RFC3339Nano), e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
	}
}
