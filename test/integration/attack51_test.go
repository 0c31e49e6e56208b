package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// slowLeaseCreates sends, as token, Lease creates in the Liqo namespace whose body does
// not arrive before deadline: the API server reads the body after API priority and
// fairness dispatched the request, so each one dispatched holds its seat until then. It
// starts burst of them at once, then perSecond more every second until feedUntil, so
// that a seat the level gains is taken again. It returns how many the API server answered
// 429 (their answer arrives once their body is sent: Go's server reads it first).
func slowLeaseCreates(ctx context.Context, url string, ca []byte, token string, burst, perSecond int, feedUntil, deadline time.Time) (rejected *atomic.Int64, wait func()) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tlsCfg := &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	host := strings.TrimPrefix(url, "https://")
	payload := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"attack51"}}`
	rejected = &atomic.Int64{}
	codes := &attackCodes
	one := func() {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(&d, "tcp", host, tlsCfg)
		if err != nil {
			codes.Store("dial:"+err.Error(), true)
			return
		}
		defer func() { _ = conn.Close() }()
		if _, err = fmt.Fprintf(conn, "POST /apis/coordination.k8s.io/v1/namespaces/%s/leases HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			wire.DefaultLiqoNamespace, host, token, len(payload)); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(deadline)):
		}
		_, _ = conn.Write([]byte(payload))
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		br := bufio.NewReader(conn)
		line, _ := br.ReadString('\n')
		f := strings.Fields(line)
		if len(f) > 1 {
			var hdr strings.Builder
			for {
				h, err := br.ReadString('\n')
				if err != nil || strings.TrimSpace(h) == "" {
					break
				}
				if strings.HasPrefix(h, "X-Kubernetes-Pf") || strings.HasPrefix(h, "Retry") {
					hdr.WriteString(strings.TrimSpace(h) + "; ")
				}
			}
			codes.Store("end:"+f[1]+" "+hdr.String(), true)
			if f[1] == "429" {
				rejected.Add(1)
			}
		}
	}
	var wg sync.WaitGroup
	for range burst {
		wg.Go(one)
	}
	wg.Go(func() {
		for time.Now().Before(feedUntil) && ctx.Err() == nil {
			time.Sleep(time.Second)
			for range perSecond {
				wg.Go(one)
			}
		}
	})
	return rejected, wg.Wait
}

var attackCodes sync.Map

// renewals does what a leader does, as victim: every 2 s, get and update Lease
// kube-system/kube-controller-manager, each within 10 s (kube-controller-manager's renew
// deadline), from start until end; it returns how many were tried and how many made it.
func renewals(ctx context.Context, t *testing.T, victim *rest.Config, start, end time.Time) (tried, ok int) {
	cs, err := kubernetes.NewForConfig(victim)
	require.NoError(t, err)
	time.Sleep(time.Until(start))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for time.Now().Before(end) {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := cs.CoordinationV1().Leases("kube-system").Get(rctx, "kube-controller-manager", metav1.GetOptions{})
			if err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				_, err = cs.CoordinationV1().Leases("kube-system").Update(rctx, l, metav1.UpdateOptions{})
			}
			mu.Lock()
			defer mu.Unlock()
			tried++
			if err == nil {
				ok++
			}
		})
		time.Sleep(2 * time.Second)
	}
	wg.Wait()
	return tried, ok
}

// TestAttack51StolenManagerTokenHoldsOnlyItsOwnLevel acts as a stolen manager token
// (helper-8): Lease creates in the Liqo namespace whose body arrives late hold the seats
// of the priority level they are dispatched to (the API server reads a body after
// dispatching the request), 500 at once and 25 more each second. When the manager's
// FlowSchema pointed at Kubernetes' leader-election level, that held every seat of it, and
// kube-controller-manager's renewals (its own identity, CN=system:kube-controller-manager,
// as kubeadm makes it) waited past their 10 s deadline. The manager's level of its own,
// which lends and borrows no seat, holds the attack: the attacker fills it, and every
// renewal of kube-controller-manager is served within its deadline.
func TestAttack51StolenManagerTokenHoldsOnlyItsOwnLevel(t *testing.T) {
	// Serial: it shows that renewals are served within their deadline during a flood; other tests' load would be in the measurement.
	cp := testenv.NewWith(t, testenv.Options{PriorityAndFairness: true}, "attack51-apf")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := newClient(t, cp.Config)
	applyYAML(t, admin, releaseManifest(t))
	require.NoError(t, installer.WaitCRDsEstablished(ctx, admin))
	require.NoError(t, admin.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-controller-manager"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kcm"), LeaseDurationSeconds: ptr.To[int32](15)}}))
	mgr, err := cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	require.NoError(t, err)
	victim, err := cp.UserConfig("system:kube-controller-manager")
	require.NoError(t, err)
	victim.QPS, victim.Burst = 1000, 1000

	var fs, kcmFS flowcontrolv1.FlowSchema
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &fs))
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: "system-leader-election"}, &kcmFS))
	schemaOf := func(cfg *rest.Config, ns, name string) string {
		schema, _ := classifiedBy(t, cfg, leaseGet(ctx, ns, name))
		return schema
	}
	require.Eventually(t, func() bool { return schemaOf(mgr, wire.DefaultLiqoNamespace, wire.ManagerName) == string(fs.UID) },
		30*time.Second, 200*time.Millisecond, "the manager's Lease requests are classified by FlowSchema liqo-auth-manager")
	require.Equal(t, string(kcmFS.UID), schemaOf(victim, "kube-system", "kube-controller-manager"), "kube-controller-manager's renewals are classified by system-leader-election")
	tried0, ok0 := renewals(ctx, t, victim, time.Now(), time.Now().Add(4*time.Second))
	require.Equal(t, tried0, ok0, "renewals without an attack")

	t0 := time.Now()
	rejected, wait := slowLeaseCreates(ctx, cp.URL, cp.CA.CertPEM, mgr.BearerToken, 500, 25, t0.Add(30*time.Second), t0.Add(40*time.Second))
	// Levels borrow seats every 10 s: the renewals are counted once the attack has all the
	// seats it can get.
	seats := make(chan float64, 1)
	go func() {
		time.Sleep(time.Until(t0.Add(12 * time.Second)))
		n, _ := testenv.ReadMetricSum(ctx, cp.Config, "apiserver_flowcontrol_current_executing_seats", map[string]string{"priority_level": wire.ManagerName})
		seats <- n
	}()
	tried, ok := renewals(ctx, t, victim, t0.Add(12*time.Second), t0.Add(30*time.Second))
	wait()
	held := <-seats
	attackCodes.Range(func(k, _ any) bool { t.Logf("the attacker saw %v", k); return true })
	attackCodes.Clear()
	t.Logf("%d of %d kube-controller-manager renewals made it within 10 s; the attacker held %v seats of level %s, and was answered 429 %d times",
		ok, tried, held, wire.ManagerName, rejected.Load())
	assert.Equal(t, tried, ok, "a stolen manager token does not hold kube-controller-manager's renewals")
	assert.Positive(t, held, "the attack reached the manager's level: it is a test of something")
}

// TestAttack51InstallAndUninstallKeepAForeignFlowSchema: another tool's FlowSchema named
// liqo-auth-manager (another priority level) is kept by install, and left by uninstall.
func TestAttack51InstallAndUninstallKeepAForeignFlowSchema(t *testing.T) {
	t.Parallel()
	cp := testenv.New(t, "attack51-foreign")[0]
	ctx := context.Background()
	c := newClient(t, cp.Config)
	foreign := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
			MatchingPrecedence: 7000,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "someone"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
			}}}}
	require.NoError(t, c.Create(ctx, foreign, client.FieldOwner("other-tool")))
	_, errOut := mustCLI(t, "install", "--kubeconfig", cp.Kubeconfig)
	assert.Contains(t, errOut, "Kept FlowSchema liqo-auth-manager")
	var got flowcontrolv1.FlowSchema
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &got))
	assert.Equal(t, foreign.Spec, got.Spec, "install left the foreign FlowSchema as it was")
	_, errOut = mustCLI(t, "uninstall", "--kubeconfig", cp.Kubeconfig, "--force", "--skip-confirm")
	t.Log(errOut)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: wire.ManagerName}, &got), "uninstall left the foreign FlowSchema")
	assert.Equal(t, foreign.Spec, got.Spec)
}
