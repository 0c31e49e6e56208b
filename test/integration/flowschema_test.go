package integration

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/installer"
	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// flowSchemaHeader and priorityLevelHeader are the response headers in which the API
// server names the FlowSchema that classified a request and its priority level (API
// priority and fairness).
const (
	flowSchemaHeader    = "X-Kubernetes-PF-FlowSchema-UID"
	priorityLevelHeader = "X-Kubernetes-PF-PriorityLevel-UID"
)

// lastHeader records one response header of the last request a client made.
type lastHeader struct {
	name string
	mu   sync.Mutex
	last string
}

func (h *lastHeader) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			h.mu.Lock()
			h.last = resp.Header.Get(h.name)
			h.mu.Unlock()
		}
		return resp, err
	})
}

func (h *lastHeader) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// classifiedBy makes request do through a client of cfg, and returns the UIDs of the
// FlowSchema and of the priority level the API server named for it (refused or not, the
// API server classified it first).
func classifiedBy(t *testing.T, cfg *rest.Config, do func(kubernetes.Interface) error) (schema, level string) {
	t.Helper()
	h, pl := &lastHeader{name: flowSchemaHeader}, &lastHeader{name: priorityLevelHeader}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(h.wrap)
	cfg.Wrap(pl.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_ = do(cs)
	return h.get(), pl.get()
}

// leaseGet is the request that reads Lease ns/name.
func leaseGet(ctx context.Context, ns, name string) func(kubernetes.Interface) error {
	return func(cs kubernetes.Interface) error {
		_, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestManagerLeaseRequestsHaveTheirOwnPriority applies the release manifest and
// shows that the API server classifies the Lease requests of liqo-auth-manager's
// ServiceAccount in the Liqo namespace, and nothing else, into the priority level
// liqo-auth-manager: in a flood of handshakes a renewal no longer queues behind the
// manager's own requests. The manager itself, run with that token and leader election, has its
// requests dispatched there.
func TestManagerLeaseRequestsHaveTheirOwnPriority(t *testing.T) {
	t.Parallel()
	cp := testenv.NewWith(t, testenv.Options{PriorityAndFairness: true}, "flowschema")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := newClient(t, cp.Config)
	applyYAML(t, admin, releaseManifest(t))
	require.NoError(t, installer.WaitCRDsEstablished(ctx, admin))
	liqo := wire.DefaultLiqoNamespace
	var fs flowcontrolv1.FlowSchema
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &fs))
	var level flowcontrolv1.PriorityLevelConfiguration
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &level))

	classified := func(t *testing.T, cfg *rest.Config, do func(kubernetes.Interface) error) string {
		t.Helper()
		schema, pl := classifiedBy(t, cfg, do)
		require.NotEmpty(t, schema, "the API server names the FlowSchema of every request")
		if schema == string(fs.UID) {
			assert.Equal(t, string(level.UID), pl, "the priority level of FlowSchema %s", fs.Name)
		}
		return schema
	}
	managerCfg, saErr := cp.ServiceAccountConfig(ctx, liqo, wire.ManagerName)
	require.NoError(t, saErr)
	leases := func(ns string) func(kubernetes.Interface) error { return leaseGet(ctx, ns, wire.ManagerName) }
	// The API server reads FlowSchemas from its informer: the new one takes a moment.
	require.Eventually(t, func() bool {
		return classified(t, managerCfg, leases(liqo)) == string(fs.UID)
	}, 20*time.Second, 100*time.Millisecond, "the manager's Lease read in %s is classified by FlowSchema %s", liqo, fs.Name)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "flowschema-probe", Namespace: liqo},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("probe")}}
	assert.Equal(t, string(fs.UID), classified(t, managerCfg, func(cs kubernetes.Interface) error {
		_, err := cs.CoordinationV1().Leases(liqo).Create(ctx, lease, metav1.CreateOptions{})
		return err
	}), "a Lease creation")
	assert.Equal(t, string(fs.UID), classified(t, managerCfg, func(cs kubernetes.Interface) error {
		l, err := cs.CoordinationV1().Leases(liqo).Get(ctx, lease.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = cs.CoordinationV1().Leases(liqo).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}), "a Lease renewal")

	// Nothing else: the manager's other requests, its Leases elsewhere, and any other
	// user's Leases in the Liqo namespace keep their own levels.
	assert.NotEqual(t, string(fs.UID), classified(t, managerCfg, func(cs kubernetes.Interface) error {
		_, err := cs.CoreV1().ConfigMaps(liqo).Get(ctx, wire.ClusterIDConfigMapName, metav1.GetOptions{})
		return err
	}), "the manager's ConfigMap read")
	assert.NotEqual(t, string(fs.UID), classified(t, managerCfg, func(cs kubernetes.Interface) error {
		return cs.CoordinationV1().Leases(liqo).Delete(ctx, lease.Name, metav1.DeleteOptions{})
	}), "the manager's Lease deletion")
	assert.NotEqual(t, string(fs.UID), classified(t, managerCfg, leases("default")), "the manager's Lease read in another namespace")
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: liqo}}))
	impostor, saErr := cp.ServiceAccountConfig(ctx, liqo, "impostor")
	require.NoError(t, saErr)
	assert.NotEqual(t, string(fs.UID), classified(t, impostor, leases(liqo)), "another ServiceAccount's Lease read in %s", liqo)
	// A namespace creator may make a ServiceAccount of the manager's name in a namespace of
	// its own: its requests are not the manager's.
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lookalike"}}))
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Namespace: "lookalike"}}))
	namesake, saErr := cp.ServiceAccountConfig(ctx, "lookalike", wire.ManagerName)
	require.NoError(t, saErr)
	assert.NotEqual(t, string(fs.UID), classified(t, namesake, leases(liqo)), "the Lease read of a ServiceAccount named %s in another namespace", wire.ManagerName)

	// The manager, with that token and leader election, renews its Lease at that level.
	s := &site{cp: cp, id: "flowschema", client: admin}
	startManager(t, s, "--kubeconfig", restrictedKubeconfig(t, s))
	require.Eventually(t, func() bool {
		n, err := testenv.ReadMetricSum(ctx, cp.Config, "apiserver_flowcontrol_dispatched_requests_total",
			map[string]string{"flow_schema": fs.Name, "priority_level": wire.ManagerName})
		return err == nil && n > 0
	}, 20*time.Second, 200*time.Millisecond, "the API server dispatches the running manager's Lease requests through FlowSchema %s", fs.Name)
}
