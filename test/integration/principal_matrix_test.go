package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cmd/info"
	"github.com/liqo-auth/liqo-auth/internal/cmd/verify"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
)

// matrixSettle is how long a forgery is given to change something before the snapshot is
// compared: the controllers react to a watch event within milliseconds.
const matrixSettle = 1500 * time.Millisecond

// Names the matrix forges with.
const (
	forgedID  = "cl-forged" // a cluster ID no administrator ever peered with
	laterID   = "cl-later"  // a consumer the provider's administrator made a nonce for
	ownNS     = "matrix-own"
	sliceName = "slice-m"
)

// matrixCase is one principal writing one kind: it forges objects (in a tenant namespace
// and outside one) or mutates the fields it may write, through f, as exactly that
// principal. known, when set, is the issue item that makes it fail today: the case is
// skipped with "known finding: <known>" until the fix lands.
type matrixCase struct {
	resource  string
	principal access.Principal
	name      string
	known     string
	// lossOnly cases mutate an object their principal may also delete: a refusal, a
	// revocation or a denial of that object is theirs to cause; nothing may be gained.
	lossOnly bool
	// finding, when set, is a finding not yet in issue 32: the case is skipped with it.
	finding string
	// disruptive cases may, when they find something, leave the peering broken: they run
	// last in their phase.
	disruptive bool
	forge      func(t *testing.T, m *matrix, f *forgery)
}

// knownFinding skips a test that reproduces a finding not fixed yet (its text says what
// and where it is said), unless LIQO_AUTH_MATRIX_KNOWN is set: the test stays, failing
// while the hole is open, for the fix to turn on. The principal matrix's cases of known
// findings use it, and any attack test of a finding left open.
func knownFinding(t *testing.T, finding string) {
	t.Helper()
	if os.Getenv("LIQO_AUTH_MATRIX_KNOWN") == "" {
		t.Skip("known finding: " + finding)
	}
}

// TestPrincipalMatrix acts, on one provider and one consumer that completed a real
// handshake, as the weakest writer of every kind liqo-auth-manager watches
// (access.ManagerWatched) and of every object liqoctl info, verify and unauthenticate
// --remote-cluster-id read (access.CommandReads). Each case forges or mutates what that
// principal may write, then compares a snapshot with the one taken before: the decisions
// (Tenant, Identity and slice verdicts, certificates, CSRs, tenant records, bindings,
// presence Leases), both managers' metrics, what info -o json and verify -o json print,
// and what unauthenticate --remote-cluster-id would delete. Nothing may change; objects
// forged get no grant. The rows come from the tables: a watched kind or a reader with a
// writer that has no case fails the test. LIQO_AUTH_MATRIX_KNOWN=1 runs the cases of known
// findings too, which are otherwise skipped.
func TestPrincipalMatrix(t *testing.T) {
	// Serial: its cases compare snapshots taken 1.5 s apart and give the peering 10 s to heal: a controller slowed by other tests would be blamed on the next case.
	cases := principalMatrix()
	t.Run("every writer has a case", func(t *testing.T) { assertMatrixCovers(t, cases) })
	if t.Failed() {
		return
	}
	m := newMatrix(t)
	for _, phase := range []string{"provider", "consumer"} {
		if phase == "consumer" {
			m.startConsumer(t)
		}
		for _, tc := range append(casesWhere(cases, false), casesWhere(cases, true)...) {
			if tc.phase() != phase {
				continue
			}
			t.Run(tc.resource+"/"+string(tc.principal)+"/"+tc.name, func(t *testing.T) {
				if tc.known != "" {
					knownFinding(t, tc.known)
				}
				if tc.finding != "" {
					knownFinding(t, "not yet in issue 32: "+tc.finding)
				}
				m.run(t, tc)
			})
		}
	}
}

func casesWhere(cases []matrixCase, disruptive bool) []matrixCase {
	var out []matrixCase
	for _, tc := range cases {
		if tc.disruptive == disruptive {
			out = append(out, tc)
		}
	}
	return out
}

// phase is when a case runs: consumer-side kinds once the consumer's manager runs (its
// presence renewals would hide provider-side findings about silent consumers).
func (tc matrixCase) phase() string {
	if strings.HasPrefix(tc.name, "consumer:") {
		return "consumer"
	}
	return "provider"
}

// assertMatrixCovers fails for each watched kind or command reader whose untrusted writer
// has no case.
func assertMatrixCovers(t *testing.T, cases []matrixCase) {
	has, declared := map[string]bool{}, map[string]bool{}
	for _, tc := range cases {
		has[tc.resource+"\x00"+string(tc.principal)] = true
	}
	for _, w := range access.ManagerWatched() {
		for _, wr := range w.Writers {
			declared[w.Resource+"\x00"+string(wr.Principal)] = true
		}
	}
	for _, r := range access.CommandReads() {
		for _, wr := range r.Writers {
			declared[r.Resource+"\x00"+string(wr.Principal)] = true
		}
	}
	for _, tc := range cases {
		if !declared[tc.resource+"\x00"+string(tc.principal)] {
			t.Errorf("case %q acts as %q on %s, a writer neither access.ManagerWatched nor access.CommandReads names: add it there", tc.name, tc.principal, tc.resource)
		}
	}
	for _, w := range access.ManagerWatched() {
		if len(w.Writers) == 0 {
			t.Errorf("kind %s is watched by the manager but names no writer: add its weakest writers to access.ManagerWatched", w.Resource)
		}
		for _, wr := range w.Writers {
			if !wr.Trusted && !has[w.Resource+"\x00"+string(wr.Principal)] {
				t.Errorf("kind %s is watched by the manager but has no principal-matrix case for its writer %q: add one", w.Resource, wr.Principal)
			}
		}
	}
	for _, r := range access.CommandReads() {
		for _, wr := range r.Writers {
			if !wr.Trusted && !has[r.Resource+"\x00"+string(wr.Principal)] {
				t.Errorf("liqoctl %s reads %s (%s) but has no principal-matrix case for its writer %q: add one", r.Command, r.Resource, r.Where, wr.Principal)
			}
		}
	}
}

// matrix is the pair of sites, its principals and what the snapshot reads.
type matrix struct {
	c, p         *site
	pAddr, cAddr string
	pTN, cTN     string
	laterTN      string
	tenantKey    client.ObjectKey
	tenantUID    string
	tenantCSR    []byte
	pSide, cSide *handshake.Side
	consumerUp   bool
	// principals, by side
	pNSCreator, cNSCreator       client.Client
	secretWriter, laterSecret    client.Client
	cSecretWriter                client.Client
	statusWriter, cStatusWriter  client.Client
	tenantWriter, peeringUser    client.Client
	theTenant                    client.Client
	csrCreator, crbWriter        client.Client
	roleWriter                   client.Client
	identityWriter, cSliceWriter client.Client
	ownGranted                   map[string]bool
}

var projectRW = []string{"get", "list", "create", "update", "patch", "delete"}

func newMatrix(t *testing.T) *matrix {
	ctx := context.Background()
	c, p := cliSites(t)
	m := &matrix{c: c, p: p, pAddr: freeLoopbackAddr(t), cAddr: freeLoopbackAddr(t),
		pTN: wire.TenantNamespaceName(c.id), cTN: wire.TenantNamespaceName(p.id), laterTN: wire.TenantNamespaceName(laterID), ownGranted: map[string]bool{}}
	startManager(t, p, "--consumer=false", "--metrics-bind-address="+m.pAddr, "--peer-gone-after=24h")
	mustCLI(t, "create", "nonce", "--kubeconfig", p.cp.Kubeconfig, "--remote-cluster-id", laterID)
	mustCLI(t, pairArgs("authenticate", c, p)...)
	mustCLI(t, "create", "resourceslice", sliceName, "--kubeconfig", c.cp.Kubeconfig, "--remote-cluster-id", p.id, "--cpu", "1")
	m.tenantKey = client.ObjectKey{Namespace: m.pTN, Name: c.id}
	var tn authv1beta1.Tenant
	require.NoError(t, p.client.Get(ctx, m.tenantKey, &tn))
	m.tenantUID, m.tenantCSR = string(tn.UID), tn.Spec.CSR
	waitSample(t, m.pAddr, "the tenant ready", func(v float64) bool { return v == 1 }, metrics.ReadyName, "peer", c.id, "side", metrics.SideProvider)
	waitSample(t, m.pAddr, "the slice's expiry", atLeast(1), metrics.ExpiryName, "kind", metrics.KindResourceSlice, "peer", c.id, "side", metrics.SideProvider, "slice", sliceName)
	waitSample(t, m.pAddr, "the unused nonce", atLeast(0), metrics.NonceAgeName, "peer", laterID)
	m.pSide = &handshake.Side{Scope: "local", Client: p.client, Config: p.cp.Config, Namespace: wire.DefaultLiqoNamespace, ClusterID: p.id, Report: discardReport{}}
	m.cSide = &handshake.Side{Scope: "local", Client: c.client, Config: c.cp.Config, Namespace: wire.DefaultLiqoNamespace, ClusterID: c.id, Report: discardReport{}}

	// The principals, each holding exactly its rules.
	const g = "authentication.liqo.io"
	m.pNSCreator = principal(t, p, "matrix-namespace-creator", "", rule("", "namespaces", "create", "get"))
	m.cNSCreator = principal(t, c, "matrix-namespace-creator", "", rule("", "namespaces", "create", "get"))
	m.secretWriter = principal(t, p, "matrix-secret-writer", m.pTN, rule("", "secrets", projectRW...))
	m.laterSecret = principal(t, p, "matrix-secret-writer", m.laterTN, rule("", "secrets", projectRW...))
	m.cSecretWriter = principal(t, c, "matrix-secret-writer", m.cTN, rule("", "secrets", projectRW...))
	statusRules := []rbacv1.PolicyRule{rule(g, "tenants", "get", "list"), rule(g, "identities", "get", "list"), rule(g, "resourceslices", "get", "list"), rule(g, "renews", "get", "list"),
		rule(g, "peerings", "get", "list"),
		{APIGroups: []string{g}, Resources: []string{"tenants/status", "identities/status", "resourceslices/status", "renews/status", "peerings/status"}, Verbs: []string{"get", "update", "patch"}}}
	m.statusWriter = principal(t, p, "matrix-status-writer", "", statusRules...)
	m.cStatusWriter = principal(t, c, "matrix-status-writer", "", statusRules...)
	m.tenantWriter = principal(t, p, "matrix-tenant-writer", m.pTN, rule(g, "tenants", projectRW...))
	m.peeringUser = principal(t, p, wire.PeeringUserName(c.id, "matrix"), m.pTN, access.PeeringUserTenantRules(c.id)...)
	m.csrCreator = principal(t, p, "matrix-csr-creator", "", rule("certificates.k8s.io", "certificatesigningrequests", "create", "get", "list", "delete"))
	require.NoError(t, p.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "matrix-empty"}}))
	t.Cleanup(func() {
		_ = p.client.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "matrix-empty"}})
	})
	m.crbWriter = principal(t, p, "matrix-crb-writer", "", rule("rbac.authorization.k8s.io", "clusterrolebindings", "create", "get", "delete"))
	// A Role writer holds the rules of the Roles it writes: a slice's (reading that slice).
	m.roleWriter = principal(t, p, "matrix-role-writer", m.pTN, rule("rbac.authorization.k8s.io", "roles", projectRW...), rule(g, "resourceslices", "get", "list", "watch"))
	m.identityWriter = principal(t, c, "matrix-identity-writer", m.cTN, rule(g, "identities", projectRW...))
	m.cSliceWriter = principal(t, c, "matrix-slice-writer", m.cTN, rule(g, "resourceslices", projectRW...))
	m.theTenant = newClient(t, restConfigFromKubeconfig(t, kubeconfigOf(t, c, p)))
	return m
}

// startConsumer starts the consumer's manager, for the consumer-side cases.
func (m *matrix) startConsumer(t *testing.T) {
	startManager(t, m.c, "--provider=false", "--metrics-bind-address="+m.cAddr)
	waitSample(t, m.cAddr, "the identity ready on the consumer", func(v float64) bool { return v == 1 }, metrics.ReadyName, "peer", m.p.id, "side", metrics.SideConsumer)
	m.consumerUp = true
}

// own returns the namespace creator of side s acting in a namespace it created (ns),
// creating it with labels first when it does not exist: a namespace creator administers
// what it creates.
func (m *matrix) own(t *testing.T, s *site, ns string, labels map[string]string) client.Client {
	t.Helper()
	ctx := context.Background()
	creator := m.pNSCreator
	if s == m.c {
		creator = m.cNSCreator
	}
	if err := creator.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		require.NoError(t, creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}))
	}
	key := s.id + "/" + ns
	if !m.ownGranted[key] {
		const g = "authentication.liqo.io"
		principal(t, s, "matrix-namespace-creator", ns, rule("", "secrets", projectRW...), rule("", "configmaps", projectRW...),
			rule(g, "tenants", projectRW...), rule(g, "identities", projectRW...), rule(g, "resourceslices", projectRW...), rule(g, "renews", projectRW...),
			rule("rbac.authorization.k8s.io", "roles", projectRW...), rule("rbac.authorization.k8s.io", "rolebindings", projectRW...))
		m.ownGranted[key] = true
	}
	cfg := rest.CopyConfig(s.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "matrix-namespace-creator"}
	return newClient(t, cfg)
}

// ownTenantNS is the namespace creator's look-alike of a tenant namespace for forgedID,
// with the tenant labels.
func (m *matrix) ownTenantNS(t *testing.T, s *site) (client.Client, string) {
	ns := wire.TenantNamespaceName(forgedID)
	return m.own(t, s, ns, map[string]string{wire.TenantNamespaceLabel: "true", wire.RemoteClusterIDLabel: forgedID}), ns
}

// forgery records what a case wrote: objects it created (which must gain no grant) and
// objects it changed; both are left out of the decisions compared, and undone after.
type forgery struct {
	t       *testing.T
	m       *matrix
	created []createdObject
	changed map[string]bool
	undo    []func()
}

type createdObject struct {
	writer client.Client
	obj    client.Object
	as     string // content right after creation
}

func objKey(o client.Object) string {
	return fmt.Sprintf("%T/%s/%s", o, o.GetNamespace(), o.GetName())
}

// create creates obj as writer; it is deleted after the case.
// createdKey marks, in a forgery's changed set, an object it created by namespace and name.
func createdKey(ns, name string) string { return "created:" + ns + "/" + name }

func (f *forgery) create(writer client.Client, admin client.Client, obj client.Object) {
	f.t.Helper()
	require.NoError(f.t, writer.Create(context.Background(), obj), "creating %s", objKey(obj))
	f.changed[string(obj.GetUID())] = true
	f.changed[createdKey(obj.GetNamespace(), obj.GetName())] = true
	f.created = append(f.created, createdObject{writer: admin, obj: obj, as: grantOf(obj)})
	f.undo = append(f.undo, func() {
		ctx := context.Background()
		if err := client.IgnoreNotFound(admin.Delete(ctx, obj)); err != nil {
			f.t.Logf("undo: deleting %s: %v", objKey(obj), err)
		}
	})
}

// mutate changes the object at key, as writer, with change; status, when set, writes its
// status subresource. The original is restored after the case (by the administrator).
func (f *forgery) mutate(writer, admin client.Client, obj client.Object, status bool, change func()) {
	f.t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	var original client.Object
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, key, obj); err != nil {
			return err
		}
		original = obj.DeepCopyObject().(client.Object)
		change()
		if status {
			return writer.Status().Update(ctx, obj)
		}
		return writer.Update(ctx, obj)
	}), "mutating %s", objKey(obj))
	f.changed[string(obj.GetUID())] = true
	for i := range f.created {
		if f.created[i].obj.GetUID() == obj.GetUID() {
			f.created[i].as = grantOf(obj) // what the principal itself wrote
		}
	}
	f.undo = append(f.undo, func() {
		if err := restore(admin, original, status); err != nil {
			f.t.Logf("undo: restoring %s: %v", objKey(original), err)
		}
	})
}

// restore puts back the labels, annotations, data, spec (or status) of original.
func restore(admin client.Client, original client.Object, status bool) error {
	ctx := context.Background()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := original.DeepCopyObject().(client.Object)
		if err := admin.Get(ctx, client.ObjectKeyFromObject(original), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cur.GetUID() != original.GetUID() {
			return nil // replaced by its owner
		}
		back := original.DeepCopyObject().(client.Object)
		back.SetResourceVersion(cur.GetResourceVersion())
		if status {
			return admin.Status().Update(ctx, back)
		}
		back.SetFinalizers(cur.GetFinalizers())
		back.SetOwnerReferences(cur.GetOwnerReferences())
		return admin.Update(ctx, back)
	})
}

// grantOf is what a controller could grant on an object a principal created: a filled or
// signed Secret, an accepted Tenant or slice, an answered Renew, an approved request.
func grantOf(obj client.Object) string {
	switch o := obj.(type) {
	case *corev1.Secret:
		return digest(o.Data)
	case *authv1beta1.Tenant:
		return digest(o.Status.AcceptedKeyFingerprint, o.Status.AcceptanceSeal, o.Status.AuthParams, o.Status.Certificate)
	case *authv1beta1.ResourceSlice:
		accepted, _ := authv1beta1.SliceVerdict(o.Status.Conditions)
		return digest(accepted, o.Status.AuthParams, o.Status.Certificate)
	case *authv1beta1.Renew:
		return digest(o.Status.AuthParams)
	case *authv1beta1.Identity:
		return digest(o.Status.Certificate)
	case *certificatesv1.CertificateSigningRequest:
		approved, _, _ := csrConditions(o)
		return digest(approved, o.Status.Certificate)
	}
	return ""
}

func digest(v ...any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// run is one case: snapshot, forge, settle, snapshot, compare; then undo.
func (m *matrix) run(t *testing.T, tc matrixCase) {
	before := m.snapshot(t, nil)
	f := &forgery{t: t, m: m, changed: map[string]bool{}}
	defer func() {
		for i := len(f.undo) - 1; i >= 0; i-- {
			f.undo[i]()
		}
		if !m.heal(t) && !t.Failed() {
			t.Errorf("once what %s wrote was undone, the peering did not recover by itself within 10 s (the Tenant, or the Identity, stayed not Ready)", tc.principal)
		}
	}()
	tc.forge(t, m, f)
	time.Sleep(matrixSettle)
	after := m.snapshot(t, f.changed)
	before, dropped := m.without(before, f.changed)
	for k := range after {
		if _, name, _ := strings.Cut(k, "|"); dropped[name] {
			delete(after, k) // what its owner put in place of what the case changed
		}
	}
	var changed []string
	for _, line := range diffSnapshots(before, after) {
		switch {
		case refusalCounted(line):
		case tc.lossOnly && isLoss(line):
			t.Logf("a loss the writer may cause (it may delete what it changed): %s", line)
		default:
			changed = append(changed, line)
		}
	}
	if len(changed) > 0 {
		t.Errorf("acting as %s on %s (%s) changed what liqo-auth decides, reports or prints:\n%s", tc.principal, tc.resource, tc.name, strings.Join(changed, "\n"))
	}
	for _, c := range f.created {
		got := c.obj.DeepCopyObject().(client.Object)
		if err := c.writer.Get(context.Background(), client.ObjectKeyFromObject(c.obj), got); err != nil {
			continue
		}
		assert.Equal(t, c.as, grantOf(got), "%s, forged by %s, was granted something (filled, signed, accepted, answered or approved)", objKey(c.obj), tc.principal)
	}
}

// refusalCounted is the count of refused handshakes, by reason: a refusal is no grant, its
// reasons are a fixed set, and its count is what tells an operator that someone forges.
func refusalCounted(line string) bool {
	return strings.Contains(line, metrics.HandshakesName+"{") && strings.Contains(line, `result="refused"`)
}

// isLoss says whether a difference only takes away: something removed, a readiness or a
// check turned off, a line printed not ready, not authorizing or denied, a slice denied.
func isLoss(line string) bool {
	switch {
	case strings.HasPrefix(line, "  - "):
		return true
	case strings.HasPrefix(line, "  ~ "):
		before, after, _ := strings.Cut(line, " -> ")
		return after == "0" || after == "false" || after == "fail" || strings.Contains(after, "Denied") || planShrank(before, after)
	case strings.HasPrefix(line, "  + "):
		return strings.Contains(line, "info on ") && !strings.Contains(line, `"ready":true`) && !strings.Contains(line, `"authorizes":true`) && !strings.Contains(line, `"state":"Accepted"`)
	}
	return false
}

// planShrank says whether a line about what unauthenticate --remote-cluster-id deletes
// only lost entries (an object it would delete is gone): each key after holds what it
// held before.
func planShrank(before, after string) bool {
	_, before, ok := strings.Cut(before, " deletes: ")
	if !ok {
		return false
	}
	var b, a map[string]any
	if json.Unmarshal([]byte(before), &b) != nil || json.Unmarshal([]byte(after), &a) != nil {
		return false
	}
	shrank := len(a) < len(b)
	for k, v := range a {
		w, had := b[k]
		switch {
		case !had:
			return false
		case fmt.Sprint(v) == fmt.Sprint(w):
		case subsetOf(v, w):
			shrank = true
		default:
			return false
		}
	}
	return shrank
}

// subsetOf says whether list v (JSON-decoded; null counts as empty) holds only entries of
// list w: a list of what would be deleted that lost entries.
func subsetOf(v, w any) bool {
	vs, _ := v.([]any)
	ws, ok := w.([]any)
	if v != nil && vs == nil || !ok {
		return false
	}
	for _, e := range vs {
		if !slices.ContainsFunc(ws, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(e) }) {
			return false
		}
	}
	return true
}

// heal brings the peering back after a case that broke it (a finding, or a loss the
// writer may cause): the consumer authenticates again, after the administrator deletes a
// Tenant that stays refused. It reports whether the peering recovered by itself.
func (m *matrix) heal(t *testing.T) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) { return m.healthy(ctx), nil }) == nil {
		return true
	}
	t.Logf("the peering did not recover once the case was undone: authenticating again")
	if _, errOut, err := runCLI(t, pairArgs("authenticate", m.c, m.p)...); err != nil {
		t.Logf("authenticate: %v\n%s\nthe administrator deletes the Tenant and authenticates again", err, errOut)
		require.NoError(t, client.IgnoreNotFound(m.p.client.Delete(context.Background(), &authv1beta1.Tenant{ObjectMeta: metaOf(m.tenantKey.Namespace, m.tenantKey.Name)})))
		eventually(t, 30*time.Second, "the Tenant deleted", func(ctx context.Context) (bool, error) {
			err := m.p.client.Get(ctx, m.tenantKey, &authv1beta1.Tenant{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		mustCLI(t, pairArgs("authenticate", m.c, m.p)...)
	}
	eventually(t, 30*time.Second, "the peering healthy again", func(ctx context.Context) (bool, error) { return m.healthy(ctx), nil })
	// Until what the new handshake causes (records, slice certificates) has settled.
	last := m.snapshot(t, nil)
	eventually(t, 30*time.Second, "the healed peering settled", func(context.Context) (bool, error) {
		time.Sleep(matrixSettle)
		now := m.snapshot(t, nil)
		settled := len(diffSnapshots(last, now)) == 0
		last = now
		return settled, nil
	})
	return false
}

// healthy: the Tenant and (once the consumer's manager runs) the Identity are Ready, and
// the provider's copy of the slice, when accepted, holds its certificate (no issuance in
// flight).
func (m *matrix) healthy(ctx context.Context) bool {
	var tn authv1beta1.Tenant
	if m.p.client.Get(ctx, m.tenantKey, &tn) != nil || !meta.IsStatusConditionTrue(tn.Status.Conditions, authv1beta1.ConditionReady) {
		return false
	}
	var rs authv1beta1.ResourceSlice
	if err := m.p.client.Get(ctx, client.ObjectKey{Namespace: m.pTN, Name: sliceName}, &rs); err == nil {
		if accepted, _ := authv1beta1.SliceVerdict(rs.Status.Conditions); accepted && rs.Status.Certificate == nil {
			return false
		}
	}
	if !m.consumerUp {
		return true
	}
	var id authv1beta1.Identity
	return m.c.client.Get(ctx, client.ObjectKey{Namespace: m.cTN, Name: wire.IdentityName(m.p.id)}, &id) == nil &&
		meta.IsStatusConditionTrue(id.Status.Conditions, authv1beta1.ConditionReady)
}

// snapshot is everything the matrix compares, by key. Objects whose UID is in skip (what
// the case itself wrote) are left out of the decisions; the metrics and the printed output
// are compared whole.
type snapshot map[string]string

// without leaves out the objects whose UID is in skip, and returns their names.
func (m *matrix) without(s snapshot, skip map[string]bool) (snapshot, map[string]bool) {
	out, dropped := snapshot{}, map[string]bool{}
	for k, v := range s {
		if uid, name, ok := strings.Cut(k, "|"); ok && skip[uid] {
			dropped[name] = true
			continue
		}
		out[k] = v
	}
	return out, dropped
}

func (m *matrix) snapshot(t *testing.T, skip map[string]bool) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{}
	put := func(obj client.Object, what string, v any) {
		if skip[string(obj.GetUID())] {
			return
		}
		b, _ := json.Marshal(v)
		s[string(obj.GetUID())+"|"+what] = string(b)
	}
	for _, side := range []*site{m.p, m.c} {
		tag := "provider "
		if side == m.c {
			tag = "consumer "
		}
		var tenants authv1beta1.TenantList
		require.NoError(t, side.client.List(ctx, &tenants))
		for i := range tenants.Items {
			tn := &tenants.Items[i]
			for _, c := range tn.Status.Conditions {
				put(tn, tag+"Tenant "+tn.Namespace+"/"+tn.Name+" condition "+c.Type, string(c.Status)+"/"+c.Reason)
			}
			put(tn, tag+"Tenant "+tn.Namespace+"/"+tn.Name, map[string]any{"state": tn.Status.TenantCondition,
				"accepted": tn.Status.AcceptedKeyFingerprint, "acceptedAt": tn.Status.AcceptedAt, "sealed": len(tn.Status.AcceptanceSeal) > 0, "cert": tn.Status.Certificate,
				"published": tn.Status.AuthParams != nil, "deleting": tn.DeletionTimestamp != nil})
		}
		var slices authv1beta1.ResourceSliceList
		require.NoError(t, side.client.List(ctx, &slices))
		for i := range slices.Items {
			rs := &slices.Items[i]
			var conds []string
			for _, c := range rs.Status.Conditions {
				conds = append(conds, c.Type+"="+c.Status+"/"+c.Reason)
			}
			put(rs, tag+"ResourceSlice "+rs.Namespace+"/"+rs.Name, map[string]any{"conditions": conds, "resources": rs.Status.Resources, "cert": rs.Status.Certificate,
				"published": rs.Status.AuthParams != nil, "deleting": rs.DeletionTimestamp != nil})
		}
		var ids authv1beta1.IdentityList
		require.NoError(t, side.client.List(ctx, &ids))
		for i := range ids.Items {
			id := &ids.Items[i]
			for _, c := range id.Status.Conditions {
				put(id, tag+"Identity "+id.Namespace+"/"+id.Name+" condition "+c.Type, string(c.Status)+"/"+c.Reason)
			}
			put(id, tag+"Identity "+id.Namespace+"/"+id.Name, map[string]any{"cert": id.Status.Certificate,
				"spec": digest(id.Spec), "deleting": id.DeletionTimestamp != nil})
		}
		var secrets corev1.SecretList
		require.NoError(t, side.client.List(ctx, &secrets))
		for i := range secrets.Items {
			sec := &secrets.Items[i]
			if sec.Labels[wire.RemoteClusterIDLabel] == "" && !strings.HasPrefix(sec.Name, "kubeconfig-") && !strings.HasPrefix(sec.Name, "liqo-") {
				continue
			}
			put(sec, tag+"Secret "+sec.Namespace+"/"+sec.Name, digest(sec.Data))
		}
		var cms corev1.ConfigMapList
		require.NoError(t, side.client.List(ctx, &cms, client.InNamespace(wire.DefaultLiqoNamespace)))
		for i := range cms.Items {
			cm := &cms.Items[i]
			put(cm, tag+"ConfigMap "+cm.Namespace+"/"+cm.Name, cm.Data)
		}
		var rbs rbacv1.RoleBindingList
		require.NoError(t, side.client.List(ctx, &rbs))
		for i := range rbs.Items {
			b := &rbs.Items[i]
			if !strings.HasPrefix(b.Name, "test-matrix-") && !strings.HasPrefix(b.Name, "test-liqo-peer-user-") {
				put(b, tag+"RoleBinding "+b.Namespace+"/"+b.Name, map[string]any{"role": b.RoleRef, "subjects": b.Subjects})
			}
		}
		var crbs rbacv1.ClusterRoleBindingList
		require.NoError(t, side.client.List(ctx, &crbs))
		for i := range crbs.Items {
			b := &crbs.Items[i]
			if !strings.HasPrefix(b.Name, "test-matrix-") && !strings.HasPrefix(b.Name, "test-liqo-peer-user-") {
				put(b, tag+"ClusterRoleBinding "+b.Name, map[string]any{"role": b.RoleRef, "subjects": b.Subjects})
			}
		}
		var roles rbacv1.RoleList
		require.NoError(t, side.client.List(ctx, &roles, client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}))
		for i := range roles.Items {
			r := &roles.Items[i]
			put(r, tag+"Role "+r.Namespace+"/"+r.Name, map[string]any{"rules": r.Rules, "granted": r.Annotations[wire.GrantedResourcesAnnotation]})
		}
		var csrs certificatesv1.CertificateSigningRequestList
		require.NoError(t, side.client.List(ctx, &csrs))
		for i := range csrs.Items {
			r := &csrs.Items[i]
			approved, denied, failed := csrConditions(r)
			put(r, tag+"CSR "+r.Name+" by "+r.Spec.Username, map[string]any{"approved": approved, "denied": denied, "failed": failed, "issued": len(r.Status.Certificate) > 0})
		}
	}
	// Presence Leases, which peergc creates and the consumer renews.
	for _, ns := range []string{m.pTN, m.laterTN, wire.TenantNamespaceName(forgedID)} {
		var lease struct{ exists bool }
		err := m.p.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.PresenceLeaseName}, &coordinationv1.Lease{})
		lease.exists = err == nil
		s["-|provider presence Lease "+ns] = fmt.Sprint(lease.exists)
	}

	// Metrics: every series of both managers; the age of a nonce only as its presence.
	m.metricsInto(t, s, "provider", m.pAddr)
	if m.consumerUp {
		m.metricsInto(t, s, "consumer", m.cAddr)
	}

	// What the commands print and delete.
	for _, side := range []*site{m.p, m.c} {
		m.infoInto(t, s, side, skip)
	}
	m.verifyInto(t, s)
	for _, peer := range []struct {
		side *handshake.Side
		id   string
	}{{m.pSide, m.c.id}, {m.cSide, m.p.id}, {m.pSide, forgedID}, {m.cSide, forgedID}, {m.pSide, laterID}} {
		h, err := handshake.InspectPeer(ctx, peer.side, peer.id)
		require.NoError(t, err)
		// A slice the case's principal created itself is theirs: unauthenticate taking it
		// along (or refusing without --delete-resourceslices) takes nothing from anyone.
		own := func(names []string) []string {
			return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return skip[createdKey(h.TenantNamespace, n)] })
		}
		plan := map[string]any{"namespace": h.TenantNamespace, "consumerSlices": own(h.ConsumerSlices), "providerSlices": own(h.ProviderSlices)}
		if h.Identity != nil {
			plan["identity"] = h.Identity.Namespace + "/" + h.Identity.Name
		}
		if h.Tenant != nil {
			plan["tenant"] = h.Tenant.Namespace + "/" + h.Tenant.Name
		}
		b, _ := json.Marshal(plan)
		s["-|unauthenticate --remote-cluster-id "+peer.id+" on "+peer.side.ClusterID+" deletes"] = string(b)
	}
	return s
}

func (m *matrix) metricsInto(t *testing.T, s snapshot, side, addr string) {
	t.Helper()
	body, err := scrape(context.Background(), addr)
	require.NoError(t, err, "scraping the %s's manager", side)
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "liqo_auth_") {
			continue
		}
		series, value, _ := strings.Cut(line, " ")
		if strings.HasPrefix(series, metrics.NonceAgeName) {
			value = "present"
		}
		s["-|"+side+" metric "+series] = value
	}
}

// infoInto records what info prints on side; a slice the case's principal created itself
// is printed as what it is (a slice in the peer's tenant namespace), and is theirs.
func (m *matrix) infoInto(t *testing.T, s snapshot, side *site, skip map[string]bool) {
	t.Helper()
	out, errOut, err := runCLI(t, "info", "--kubeconfig", side.cp.Kubeconfig, "-o", "json")
	require.NoError(t, err, "liqoctl info on %s: %s", side.id, errOut)
	var r info.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	line := func(what string, v any) {
		b, _ := json.Marshal(v)
		s["-|info on "+side.id+": "+what+" "+string(b)] = "printed"
	}
	for _, e := range r.Tenants {
		line("tenant", e)
	}
	for _, e := range r.Identities {
		line("identity", e)
	}
	for _, e := range r.Certificates {
		line("certificate", e)
	}
	for _, e := range r.PeeringUsers {
		line("peering user", e)
	}
	for _, e := range r.ResourceSlices {
		if !skip[createdKey(e.Namespace, e.Name)] {
			line("slice", e)
		}
	}
	line("manager", r.Manager.State)
}

func (m *matrix) verifyInto(t *testing.T, s snapshot) {
	t.Helper()
	out, _, err := runCLI(t, "verify", "--kubeconfig", m.c.cp.Kubeconfig, "-o", "json")
	s["-|verify on "+m.c.id+" exits"] = fmt.Sprint(err == nil)
	var r verify.Report
	if json.Unmarshal([]byte(out), &r) != nil {
		s["-|verify on "+m.c.id+" prints"] = out
		return
	}
	for _, p := range r.Peers {
		for _, c := range p.Checks {
			s["-|verify on "+m.c.id+": "+p.Consumer+" on "+p.Provider+" "+c.Name] = c.Result
		}
	}
}

// diffSnapshots names every entry added, removed or changed, by name: an object its owner
// replaced (another UID) is the same entry.
func diffSnapshots(before, after snapshot) []string {
	byName := func(s snapshot) map[string]string {
		out := map[string]string{}
		for k, v := range s {
			_, n, _ := strings.Cut(k, "|")
			out[n] = v
		}
		return out
	}
	b, a := byName(before), byName(after)
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "  + "+k+": "+v)
		} else if w != v {
			out = append(out, "  ~ "+k+": "+w+" -> "+v)
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "  - "+k+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// discardReport prints nothing.
type discardReport struct{}

func (discardReport) Info(string, ...any) {}
func (discardReport) Warn(string, ...any) {}

func nonceData(t *testing.T) map[string][]byte {
	n, err := authn.NewNonce()
	require.NoError(t, err)
	return map[string][]byte{wire.NonceField: []byte(n)}
}

func cpu(n string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
}
