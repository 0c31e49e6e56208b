package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/tenant"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// floorCSRLabel marks the CSRs of the scale floor.
const floorCSRLabel = "liqo-auth.bench/floor"

// scaleFloorResult is what N handshakes' writes cost without a handshake.
type scaleFloorResult struct {
	n int
	// asPrincipals says the manager's writes were made as the manager's ServiceAccount
	// (authorized by RBAC, checked by the admission policies liqoctl install sets), not as
	// the administrator.
	asPrincipals bool
	total        time.Duration
	// retried counts the manager's writes refused and made again, as its reconciles are
	// requeued: Forbidden while the API server's authorizer has not yet seen the manager's
	// binding in a tenant namespace made a moment before.
	retried int64
	// cpu is the CPU seconds each of the provider's processes and this benchmark spent.
	cpu map[string]float64
	api []testenv.APIRate
}

// madeBy names who made the writes, for the report.
func (s *scaleFloorResult) madeBy() string {
	if s.asPrincipals {
		return "their principals"
	}
	return "the administrator"
}

// floorProcesses are the processes a scale floor run reports: no manager runs.
var floorProcesses = []string{"kube-apiserver", "etcd", "kube-controller-manager", "consumers (bench)"}

// scaleFloorRun makes, for each of n consumers at once, exactly the writes of one
// handshake on a provider (the consumer's control plane), and nothing else: no manager, no
// read, no check, no cache. In the order a handshake makes them: the tenant namespace, its
// record and the manager's binding there; the nonce; the Tenant; the nonce's consumption
// in the record; the finalizer; the Role and two RoleBindings, owned by the Tenant; the
// five SubjectAccessReviews of the issuance; the CSR, its approval, and the signer's
// certificate (one watch of CSRs for all); the certificate in the record; the Tenant's
// status; the Event; the CSR deleted. What it costs is the floor under any implementation
// of this design on this machine; the scale run's CPU beyond it is the controller's.
//
// With asPrincipals, each write is made by the principal that makes it in a handshake:
// the consumer's part by the administrator, the acceptance's and the issuance's by the
// manager's ServiceAccount, which the API server authorizes by RBAC and the admission
// policies of liqoctl install check, as they do the manager's requests, as many at once as
// its tenant controller has workers (tenant.Workers). That is the floor under a
// controller with the manager's narrow identity and pace.
func (e *env) scaleFloorRun(ctx context.Context, n int, asPrincipals bool) (*scaleFloorResult, error) {
	prefix := "cl-floor-"
	if asPrincipals {
		prefix = "cl-floorp-"
	}
	consumers, err := testenv.NewVirtualConsumers(fmt.Sprintf("%s%d-", prefix, n), n)
	if err != nil {
		return nil, err
	}
	// On the consumer's control plane: the same build, installed alike, which the scale
	// runs (virtual consumers into the provider) leave untouched.
	cp := e.consumer
	c, err := testenv.UnthrottledClient(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	manager, workers, profileFile, err := floorPrincipals(ctx, cp, c, n, asPrincipals)
	if err != nil {
		return nil, err
	}
	signed, stop := watchSigned(ctx, c)
	defer stop()
	res := &scaleFloorResult{n: n, asPrincipals: asPrincipals}
	pids := cp.ProcessIDs()
	pids["consumers (bench)"] = os.Getpid()
	before := cpuOf(pids)
	apiBefore, err := testenv.ReadAPICounters(ctx, cp.Config)
	if err != nil {
		return nil, err
	}
	profiles, err := e.profileFloor(ctx, cp, n, profileFile)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, v := range consumers {
		wg.Go(func() { errs <- handshakeWrites(ctx, cp, c, manager, workers, v, signed, &res.retried) })
	}
	wg.Wait()
	res.total = time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if profileErr := profiles.Wait(); profileErr != nil {
		return nil, profileErr
	}
	if res.cpu, res.api, err = spentSince(ctx, cp, cpuOf(pids), before, apiBefore, n); err != nil {
		return nil, err
	}
	for _, v := range consumers {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wire.TenantNamespaceName(v.ID)}})
		_ = c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(v.ID)}})
	}
	return res, nil
}

// floorPrincipals says how a scale floor run of n handshakes on cp makes the manager's
// part: its client (the administrator's, c, or the manager's ServiceAccount's, unthrottled,
// with asPrincipals), how many handshakes at once (workers), and the file of the API
// server's profile.
//
// As their principals, the manager's part is made tenant.Workers at once, as its tenant
// controller's workers make it: all at once, the manager's ServiceAccount's requests,
// slower through RBAC and the admission policies, fill the API server's limit of mutating
// requests in flight for seconds and are refused (429, in two runs of three), which the
// manager never does. As the administrator, all at once (the floor's first measure).
func floorPrincipals(ctx context.Context, cp *testenv.ControlPlane, c client.WithWatch, n int, asPrincipals bool) (client.WithWatch, chan struct{}, string, error) {
	if !asPrincipals {
		return c, make(chan struct{}, n), "kube-apiserver-floor.pprof", nil
	}
	cfg, err := cp.ServiceAccountConfig(ctx, wire.DefaultLiqoNamespace, wire.ManagerName)
	if err != nil {
		return nil, nil, "", err
	}
	m, err := testenv.UnthrottledClient(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, nil, "", err
	}
	return m, make(chan struct{}, tenant.Workers), "kube-apiserver-floor-principals.pprof", nil
}

// profileFloor takes, in the background when the run profiles, a CPU profile of cp's API
// server during the floor's writes into file of the profile directory: what the API server
// does with the writes alone, beside the scale run's profile. Wait on the group returned.
func (e *env) profileFloor(ctx context.Context, cp *testenv.ControlPlane, n int, file string) (*errgroup.Group, error) {
	var profiles errgroup.Group
	if e.cfg.profileDir == "" {
		return &profiles, nil
	}
	apiClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(e.cfg.profileDir, 0o755); err != nil {
		return nil, err
	}
	profiles.Go(func() error {
		return cpuProfile(ctx, apiClient, cp.Config.Host, max(2, n/50), filepath.Join(e.cfg.profileDir, file))
	})
	return &profiles, nil
}

// handshakeWrites makes the writes of one handshake of v (scaleFloorRun): the consumer's
// through c, then the acceptance's and the issuance's through manager, holding one of
// workers as one of the manager's reconciles would.
func handshakeWrites(ctx context.Context, cp *testenv.ControlPlane, c, manager client.Client, workers chan struct{}, v *testenv.VirtualConsumer, signed *signedCSRs, retried *int64) error {
	f := &floorHandshake{c: c, m: manager, v: v, tn: wire.TenantNamespaceName(v.ID), retried: retried}
	if err := f.arrive(ctx); err != nil {
		return fmt.Errorf("%s: %w", v.ID, err)
	}
	select {
	case workers <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for a worker: %w", v.ID, ctx.Err())
	}
	defer func() { <-workers }()
	if err := f.accept(ctx); err != nil {
		return fmt.Errorf("%s: %w", v.ID, err)
	}
	if err := f.issue(ctx, signed, cp.Config.Host, cp.Config.CAData); err != nil {
		return fmt.Errorf("%s: %w", v.ID, err)
	}
	return nil
}

// floorHandshake is one handshake of the scale floor, as it goes.
type floorHandshake struct {
	c     client.Client // the consumer's writes
	m     client.Client // the manager's writes
	v     *testenv.VirtualConsumer
	tn    string
	rec   *cluster.TenantRecord
	cm    *corev1.ConfigMap
	nonce string
	sig   []byte
	t     *authv1beta1.Tenant
	// retried counts, for the whole run, the writes made again (floorRetry).
	retried *int64
}

// floorRetry makes write as the manager's reconciles make it: again, after the tenant
// controller's backoff (5 ms, doubled each time), while the API server refuses it as
// Forbidden, which it does while its authorizer has not yet seen the manager's binding in
// the tenant namespace, made a moment before by the consumer's part (the admission policy
// liqo-auth-manager-tenant-writes asks the authorizer). Each retry is counted in retried.
func floorRetry(ctx context.Context, retried *int64, write func() error) error {
	delay := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !apierrors.IsForbidden(err) || attempt == 10 {
			return err
		}
		atomic.AddInt64(retried, 1)
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
		delay *= 2
	}
}

// arrive is the consumer's part: the tenant namespace, its record and the manager's
// binding there, the nonce, the Tenant.
func (f *floorHandshake) arrive(ctx context.Context) error {
	id := f.v.ID
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.tn, Labels: cluster.TenantNamespaceLabels(id)}}
	if err := f.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	f.rec = &cluster.TenantRecord{RemoteID: id, Namespace: f.tn, NamespaceUID: ns.UID}
	f.cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wire.DefaultLiqoNamespace, Name: wire.TenantRecordName(id),
		Labels: map[string]string{wire.TenantRecordLabel: "true", wire.ManagedByLabel: wire.ManagedByValue, wire.RemoteClusterIDLabel: id}}}
	if err := writeRecord(ctx, f.c, f.cm, f.rec, true); err != nil {
		return err
	}
	if err := f.c.Create(ctx, access.ForgeManagerTenantBinding(wire.DefaultLiqoNamespace, f.tn)); err != nil {
		return fmt.Errorf("manager binding: %w", err)
	}
	var err error
	if f.nonce, err = authn.NewNonce(); err != nil {
		return err
	}
	nonce := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.NonceSecretName, Namespace: f.tn,
		Labels:      map[string]string{wire.NonceLabel: "true", wire.RemoteClusterIDLabel: id},
		Annotations: map[string]string{wire.NonceIssuedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{wire.NonceField: []byte(f.nonce)}}
	if err = f.c.Create(ctx, nonce); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	if f.sig, err = authn.SignNonce(f.v.Key, f.nonce); err != nil {
		return err
	}
	if f.t, err = handshake.ForgeTenant(id, f.v.Key, f.sig, f.tn, ""); err != nil {
		return err
	}
	controllerutil.AddFinalizer(f.t, wire.TenantFinalizer) // as liqoctl's Tenant where a manager runs
	if err = f.c.Create(ctx, f.t); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	f.rec.ConsumedNonce = &cluster.ConsumedNonce{Digest: cluster.NonceDigest(f.nonce), TenantUID: string(f.t.UID), KeyFingerprint: "sha256:floor",
		CSRDigest: "sha256:floor", SecretUID: string(nonce.UID), At: time.Now().UTC().Truncate(time.Second)}
	return nil
}

// accept is the acceptance's part: the nonce's consumption, the Role and two
// RoleBindings owned by the Tenant, the five SubjectAccessReviews before the issuance.
func (f *floorHandshake) accept(ctx context.Context) error {
	id := f.v.ID
	if err := writeRecord(ctx, f.m, f.cm, f.rec, false); err != nil {
		return err
	}
	for _, o := range access.AccessObjects(f.tn, id, access.IdentitySubjects(id, nil)) {
		if err := controllerutil.SetControllerReference(f.t, o, scheme.New()); err != nil {
			return err
		}
		if err := floorRetry(ctx, f.retried, func() error { return f.m.Create(ctx, o) }); err != nil {
			return fmt.Errorf("access: %w", err)
		}
	}
	// The manager's reviews before an issuance, exactly: none allowed, so no baseline.
	if _, err := revocation.SentinelsAllowed(ctx, f.m, id, []string{wire.UserGroup, "system:authenticated"}); err != nil {
		return fmt.Errorf("reviews: %w", err)
	}
	return nil
}

// issue is the issuance's part: the CSR, its approval and the signer's certificate, the
// certificate recorded, the Tenant's status, the Event, the CSR deleted.
func (f *floorHandshake) issue(ctx context.Context, signed *signedCSRs, server string, ca []byte) error {
	id, t := f.v.ID, f.t
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "liqo-" + id + "-", Labels: map[string]string{floorCSRLabel: "true",
			// As the manager's requests: the admission policy on its CSRs asks for both.
			wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: string(t.UID)}},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: t.Spec.CSR, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To[int32](3600), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}},
	}
	if err := f.m.Create(ctx, csr); err != nil {
		return fmt.Errorf("csr: %w", err)
	}
	done := signed.wait(csr.UID)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Floor", Message: "benchmark"})
	if err := f.m.SubResource("approval").Update(ctx, csr); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	var certPEM []byte
	select {
	case certPEM = <-done:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the signer: %w", ctx.Err())
	}
	cert, err := authn.ParseCertificate(certPEM)
	if err != nil {
		return err
	}
	f.rec.AddCertificate(cluster.IssuedCertificate{Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter, KeyFingerprint: "sha256:floor"}, time.Now())
	f.rec.PublishedCertificate, f.rec.PublishedForTenant = string(certPEM), string(t.UID)
	if err = writeRecord(ctx, f.m, f.cm, f.rec, false); err != nil {
		return err
	}
	now := metav1.Now()
	t.Status = authv1beta1.TenantStatus{TenantNamespace: f.tn, AcceptedKeyFingerprint: "sha256:floor", AcceptedCSRDigest: "sha256:floor", AcceptanceSeal: f.sig, AcceptedAt: &now,
		TenantCondition: authv1beta1.TenantConditionActive, ObservedGeneration: t.Generation,
		AuthParams: &authv1beta1.AuthParams{APIServer: server, CA: ca, SignedCRT: certPEM}}
	for _, typ := range []string{authv1beta1.ConditionAuthenticated, authv1beta1.ConditionAccessGranted, authv1beta1.ConditionCertificateIssued, authv1beta1.ConditionReady} {
		meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Floor", Message: "the scale floor writes what a handshake writes", ObservedGeneration: t.Generation})
	}
	if err = f.m.Status().Update(ctx, t); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: f.tn, Name: fmt.Sprintf("%s.%x", id, time.Now().UnixNano())}, EventTime: metav1.NowMicro(),
		ReportingController: "liqo.io/liqo-auth-manager", ReportingInstance: "bench", Action: authv1beta1.ConditionCertificateIssued, Reason: authv1beta1.ReasonCertificateIssued,
		Type: corev1.EventTypeNormal, Note: "certificate " + cert.SerialNumber.Text(16), Regarding: corev1.ObjectReference{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Tenant", Namespace: f.tn, Name: id, UID: t.UID}}
	if err = f.m.Create(ctx, ev); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	if err = f.m.Delete(ctx, csr); err != nil {
		return fmt.Errorf("deleting the csr: %w", err)
	}
	return nil
}

// writeRecord creates (create) or replaces the tenant record cm with rec, without reading
// it first.
func writeRecord(ctx context.Context, c client.Client, cm *corev1.ConfigMap, rec *cluster.TenantRecord, create bool) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cm.Data = map[string]string{"record": string(data)}
	if create {
		err = c.Create(ctx, cm)
	} else {
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("tenant record: %w", err)
	}
	return nil
}

// signedCSRs hands each waiter the certificate of its CSR, from one watch of the floor's
// CSRs. A waiter registers before it approves its CSR, so no certificate comes before its
// waiter; one that comes after (a relist) finds none and is dropped.
type signedCSRs struct {
	mu      sync.Mutex
	waiting map[types.UID]chan []byte
}

func (s *signedCSRs) wait(uid types.UID) <-chan []byte {
	ch := make(chan []byte, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[uid] = ch
	return ch
}

func (s *signedCSRs) signed(uid types.UID, cert []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.waiting[uid]; ok {
		ch <- cert
		delete(s.waiting, uid)
	}
}

// watchSigned watches the floor's CSRs (as a controller's informer would: listed, then
// watched, listed again if the watch ends) and dispatches their certificates; stop ends it.
func watchSigned(ctx context.Context, c client.WithWatch) (*signedCSRs, func()) {
	ctx, stop := context.WithCancel(ctx)
	s := &signedCSRs{waiting: map[types.UID]chan []byte{}}
	selector := client.MatchingLabels{floorCSRLabel: "true"}
	dispatch := func(csr *certificatesv1.CertificateSigningRequest) {
		if len(csr.Status.Certificate) > 0 {
			s.signed(csr.UID, csr.Status.Certificate)
		}
	}
	go func() {
		for ctx.Err() == nil {
			var list certificatesv1.CertificateSigningRequestList
			if err := c.List(ctx, &list, selector); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for i := range list.Items {
				dispatch(&list.Items[i])
			}
			w, err := c.Watch(ctx, &certificatesv1.CertificateSigningRequestList{}, selector, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && ev.Type == watch.Modified {
					dispatch(csr)
				}
			}
			w.Stop()
		}
	}()
	return s, stop
}
