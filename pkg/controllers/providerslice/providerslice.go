// Package providerslice is the provider controller of ResourceSlices: the second step of
// the handshake. A consumer's control-plane identity writes a ResourceSlice into its
// tenant namespace on the provider; this controller accepts or denies it and, when it
// accepts, issues the slice's own, narrower identity.
//
// Who writes what it reads: the slice (spec, labels and, through resourceslices/status,
// nothing: the tenant's role reads status only) is written by the tenant holding a
// control-plane certificate, by anyone allowed to write ResourceSlices in that namespace,
// and by the provider's administrator. So nothing in a slice is trusted: its namespace
// must be the tenant namespace of spec.consumerClusterID by this cluster's own record, the
// consumer's Tenant there must carry an acceptance sealed by this provider and be Active
// (Cordoned: no new slice; Drained: its slices are deleted), and the CSR must pass every
// rule for subject CN=<slice>-<hash of C>, O=<C> and the Tenant's accepted key (unless the
// Tenant's authzPolicy is TolerateNoHandshake and the manager was started to honor it:
// the key match is then skipped, as in Liqo; whoever may write the Tenant may set it).
// What a slice was granted is recorded on its Role (annotation liqo.io/granted-resources),
// which only the provider's administrator and this manager write: a Cordoned tenant's
// existing slices and the tenant's limits are judged from those grants, never from a
// slice's status, which anyone allowed resourceslices/status may forge (Liqo's
// liqo-remote-controlplane lets the tenant itself). The identity is checked to hold no permission of
// its own before a certificate is requested, and is granted only reading its own slice.
package providerslice

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/issuing"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/ownedrbac"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
	"github.com/liqo-auth/liqo-auth/pkg/issuer"
	"github.com/liqo-auth/liqo-auth/pkg/metrics"
	"github.com/liqo-auth/liqo-auth/pkg/revocation"
)

// DefaultClass is the class of a slice that names none.
const DefaultClass = "default"

// Options of the provider's slice controller.
type Options struct {
	// Tenant are the issuing options shared with the tenant controller (URL, CA,
	// certificate lifetime, renewal, CSR timeout).
	Tenant issuing.Options
	// DisableDefaultClass denies slices of the default class.
	DisableDefaultClass bool
	// Classes are the classes offered besides the default one.
	Classes []string
	// HonorNoHandshake lets a Tenant's authzPolicy TolerateNoHandshake skip the match of a
	// slice's key with the Tenant's accepted key. Off by default: whoever may write the
	// Tenant (not only the provider's administrator) may set that policy, and with it have
	// an identity of the consumer's group issued for a key of their own.
	HonorNoHandshake bool
	// MaxPerTenant is how many slices one tenant may hold (DefaultMaxPerTenant when 0):
	// the tenant writes its slices, and each one is held in the manager's memory and
	// decided, for every tenant by the same manager.
	MaxPerTenant int
}

// DefaultMaxPerTenant is how many slices a tenant may hold unless configured otherwise.
const DefaultMaxPerTenant = 64

// Reconciler decides ResourceSlices in tenant namespaces.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Placement placement.Placement
	Recorder  events.EventRecorder
	Options   Options
	// Keys are this cluster's keys: a Tenant's acceptance is sealed with one of them (the
	// current one, or another of the set while a rotation is under way). Nil: no seal
	// verifies.
	Keys cluster.KeySource
	// ClusterID is this provider's: a slice whose consumer it is, is the consumer side's.
	ClusterID string
	// Issuer has the slices' certificates signed.
	Issuer *issuer.Issuer
	// Metrics count the certificates issued, renewed and failed (nil: none).
	Metrics *metrics.Metrics
	Now     func() time.Time

	// tenantLocks serializes the decisions of one tenant's slices, so that two slices
	// decided at once cannot both fit in what is left of its limits.
	tenantLocks sync.Map
}

// Consumer's copy: the labels a consumer puts on the slice it writes into a provider.
func isProviderCopy(o client.Object) bool {
	return o.GetLabels()[wire.ReplicationStatusLabel] == "true"
}

// sliceEvents lets through the events of a copy a consumer made here, and of a slice that
// was one or still carries this controller's finalizer: the tenant may take the label off
// a slice granted access, which must then be taken back.
func sliceEvents() predicate.Predicate {
	ours := func(o client.Object) bool {
		return o != nil && (isProviderCopy(o) || controllerutil.ContainsFinalizer(o, wire.ProviderSliceFinalizer))
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return ours(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return ours(e.ObjectOld) || ours(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return ours(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return ours(e.Object) },
	}
}

// SetupWithManager registers the reconciler: the slices consumers copied here, what they
// cause (Roles, RoleBindings, CSRs), and the Tenants they depend on.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if err := issuer.IndexByOwner(context.Background(), mgr.GetFieldIndexer(), wire.SliceAnnotation); err != nil {
		return err
	}
	b := wiring.NewController(mgr, "providerslice", access.Provider).
		For(&authv1beta1.ResourceSlice{}, sliceEvents()).
		Owns(&rbacv1.RoleBinding{}, &authv1beta1.ResourceSlice{}).
		Owns(&rbacv1.Role{}, &authv1beta1.ResourceSlice{}).
		Watches(&certificatesv1.CertificateSigningRequest{}, handler.EnqueueRequestsFromMapFunc(csrToSlice),
			wiring.HasLabel(wire.ManagedByLabel, wire.ManagedByValue)).
		Watches(&authv1beta1.Tenant{}, handler.EnqueueRequestsFromMapFunc(wiring.InNamespaceOf(mgr.GetClient(), func() *authv1beta1.ResourceSliceList { return &authv1beta1.ResourceSliceList{} }, isProviderCopy)),
			wiring.AfterStart()).
		Reads(&rbacv1.ClusterRoleBinding{})
	// A tenant record's change (a namespace recorded, limits set) re-decides the slices of
	// its tenant namespace.
	inRecorded := wiring.InNamespaceOf(mgr.GetClient(), func() *authv1beta1.ResourceSliceList { return &authv1beta1.ResourceSliceList{} }, isProviderCopy)
	b = b.Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Data["namespace"] == "" {
			return nil
		}
		probe := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Data["namespace"]}}
		return inRecorded(ctx, probe)
	}), wiring.HasLabel(wire.TenantRecordLabel, "true"), wiring.AfterStart()).
		Reads(&corev1.Namespace{})
	return b.Complete(r)
}

// deleteLeftovers deletes the CertificateSigningRequests this manager made for a slice of
// this name other than the one that holds it now (current, "" when none does): the tenant
// writes its slices, and may strip the finalizer the moment it lands, or delete a slice
// and make it again under its name while its reconcile goes on, as a peering user may
// with a Tenant (tenant.Reconciler.deleteLeftovers).
func (r *Reconciler) deleteLeftovers(ctx context.Context, key types.NamespacedName, current types.UID) error {
	return r.Issuer.DeleteLeftovers(ctx, wire.SliceAnnotation, key, current,
		issuer.LiveUID(r.APIReader, authv1beta1.GroupVersion.WithKind("ResourceSlice"), key))
}

// deleteOrphans deletes the Role and RoleBinding a slice of this name, now gone, left with
// no controller (ownedrbac.DeleteOrphans).
func (r *Reconciler) deleteOrphans(ctx context.Context, key types.NamespacedName) error {
	return ownedrbac.DeleteOrphans(ctx, r.Client, r.Client, sliceAccessByName(key.Namespace, key.Name))
}

// sliceAccessByName are the Role and RoleBinding of slice name in namespace ns, labelled
// only as what identifies them whoever the slice says its consumer is: this project's and
// the slice's name labels. The consumer's label is left out: a slice's
// spec.consumerClusterID is the tenant's to rewrite, and an orphan of its access, labelled
// for the consumer it first named, must be found after such a rewrite too
// (TestAttack53RelabelledSliceHeldAndOrphaned).
func sliceAccessByName(ns, name string) []client.Object {
	objs := access.SliceAccessObjects(ns, name, rbacv1.Subject{}, "", nil)
	for _, o := range objs {
		labels := maps.Clone(o.GetLabels())
		delete(labels, wire.RemoteClusterIDLabel)
		o.SetLabels(labels)
	}
	return objs
}

func csrToSlice(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[wire.SliceAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile decides one slice: it reads what the decision needs, asks the checks in
// order, sets the conditions from the first failure (or accepts), and only then acts:
// deletes the slice of a Drained tenant, or grants an accepted slice its access and
// certificate. The status is written only when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &authv1beta1.ResourceSlice{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, errors.Join(r.deleteLeftovers(ctx, req.NamespacedName, ""), r.deleteOrphans(ctx, req.NamespacedName))
	}
	if err := r.deleteLeftovers(ctx, req.NamespacedName, rs.UID); err != nil {
		return ctrl.Result{}, err
	}
	// A slice being deleted, or one that is not (or no longer) a copy a consumer made here,
	// keeps nothing it was granted: the tenant writes the label and the consumer's ID that
	// say so, and could otherwise take a slice it holds with a finalizer of its own out of
	// this controller's hands, access and all (TestAttack49TenantHidesItsHeldSliceFromFinalize).
	// finalize removes only what the slice controls and the requests made for its UID: a
	// consumer's own slice, which has neither, costs it cache reads.
	id, providerCopy := access.SliceConsumer(rs)
	if rs.DeletionTimestamp != nil || !providerCopy || id == r.ClusterID {
		return ctrl.Result{}, r.finalize(ctx, rs)
	}
	mu, _ := r.tenantLocks.LoadOrStore(rs.Namespace, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	before := rs.Status.DeepCopy()
	in := r.newInput(rs, id)
	v, err := firstFailure(in, func(s stage) error { return r.load(ctx, in, s) })
	if err != nil {
		return ctrl.Result{}, err
	}
	if v != nil && v.drained {
		return ctrl.Result{}, r.drain(ctx, in)
	}
	r.setConditions(in, v)
	var res ctrl.Result
	if v == nil {
		if res, err = r.grant(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.saveStatus(ctx, rs, before); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return res, nil
}

// setConditions sets the slice's conditions from the decision, with an Event for each
// condition that changed: v is the first failed check (nil: every check passed).
func (r *Reconciler) setConditions(in *input, v *verdict) {
	rs, now := in.slice, metav1.NewTime(r.Now())
	set := func(typ, status, reason, msg string) {
		if !authv1beta1.SetSliceCondition(&rs.Status.Conditions, typ, status, reason, msg, now) {
			return
		}
		eventType := corev1.EventTypeNormal
		if status == authv1beta1.ResourceSliceDenied {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(rs, nil, eventType, reason, "DecideResourceSlice", "%s", msg)
	}
	switch {
	case v == nil:
		class := rs.Spec.Class
		if class == "" {
			class = DefaultClass
		}
		rs.Status.Class, rs.Status.Resources = authv1beta1.ResourceSliceClass(class), rs.Spec.Resources.DeepCopy()
		set(authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceAccepted, authv1beta1.ReasonSliceAuthenticationAccepted,
			fmt.Sprintf("identity %q (group %q) for the consumer's accepted key", in.user, in.id))
		set(authv1beta1.ResourceSliceConditionResources, authv1beta1.ResourceSliceAccepted, authv1beta1.ReasonSliceResourcesAccepted,
			fmt.Sprintf("class %q, resources as requested", class))
	case v.authenticated:
		set(authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceAccepted, authv1beta1.ReasonSliceAuthenticationAccepted,
			"the slice's CSR is for the consumer's accepted key")
		set(v.typ, authv1beta1.ResourceSliceDenied, v.reason, v.msg)
	default:
		set(v.typ, authv1beta1.ResourceSliceDenied, v.reason, v.msg)
	}
}

// drain deletes the slice of a Drained tenant.
func (r *Reconciler) drain(ctx context.Context, in *input) error {
	err := r.Client.Delete(ctx, in.slice)
	r.Recorder.Eventf(in.tenant, nil, corev1.EventTypeNormal, authv1beta1.ReasonSliceDeletedDrained, "DrainTenant", "ResourceSlice %s deleted: the tenant is Drained", in.slice.Name)
	return client.IgnoreNotFound(err)
}

// grant gives an accepted slice's identity its access (only repaired for a Cordoned
// tenant) and has its certificate issued.
func (r *Reconciler) grant(ctx context.Context, in *input) (ctrl.Result, error) {
	rs := in.slice
	keyGroup := in.keyGroup()
	objs := access.SliceAccessObjects(rs.Namespace, rs.Name, access.SliceSubject(in.user, keyGroup), in.id, rs.Spec.Resources)
	if _, err := ownedrbac.EnsureControlled(ctx, r.Client, r.APIReader, rs, objs, in.state == authv1beta1.TenantConditionCordoned); err != nil {
		return ctrl.Result{}, err
	}
	return r.certificate(ctx, rs, in.tenant, identity{user: in.user, keyGroup: keyGroup})
}

// identity is the slice identity a certificate is issued to: its user and, for a
// key-bound identity, its key group (bound instead of the user).
type identity struct {
	user, keyGroup string
}

// groups are the groups the identity's certificate authenticates with: the consumer's
// cluster ID, and its key group when it has one.
func (id identity) groups(org string) []string {
	if id.keyGroup == "" {
		return []string{org}
	}
	return []string{org, id.keyGroup}
}

// saveStatus writes the slice's status when it differs from before, and counts a
// certificate that is new in it.
func (r *Reconciler) saveStatus(ctx context.Context, rs *authv1beta1.ResourceSlice, before *authv1beta1.ResourceSliceStatus) error {
	rs.Status.ObservedGeneration = rs.Generation
	if equality.Semantic.DeepEqual(before, &rs.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, rs); err != nil {
		return err
	}
	if now := rs.Status.Certificate; now != nil && (before.Certificate == nil || before.Certificate.SerialNumber != now.SerialNumber) {
		outcome := metrics.OutcomeIssued
		if before.Certificate != nil {
			outcome = metrics.OutcomeRenewed
		}
		r.Metrics.Certificate(metrics.KindResourceSlice, outcome)
	}
	return nil
}

// certificate has the slice's identity certificate issued or renewed and published.
func (r *Reconciler) certificate(ctx context.Context, rs *authv1beta1.ResourceSlice, t *authv1beta1.Tenant, who identity) (ctrl.Result, error) {
	now := r.Now()
	cur := rs.Status.Certificate
	if rs.Status.AuthParams.HasCertificate() && cur != nil && cur.RenewAfter != nil && now.Before(cur.RenewAfter.Time) && r.publishedFor(rs, who.user, now) {
		return ctrl.Result{RequeueAfter: cur.RenewAfter.Sub(now)}, nil
	}
	if r.Options.Tenant.APIServer == "" || len(r.Options.Tenant.CA) == 0 {
		return ctrl.Result{}, fmt.Errorf("the provider does not know the API server URL and CA to hand to consumers")
	}
	serial := ""
	if cur != nil {
		serial = cur.SerialNumber
	}
	s := issuer.Subject{Owner: rs, Annotation: wire.SliceAnnotation, RemoteID: string(t.Spec.ClusterID), Request: rs.Spec.CSR, CurrentSerial: serial,
		Reason: authv1beta1.ReasonLiqoResourceSliceAccepted, Message: fmt.Sprintf("ResourceSlice %s/%s of an accepted Tenant", rs.Namespace, rs.Name)}
	is, foreign, err := r.Issuer.Ensure(ctx, s, now, r.beforeSubmit(rs, t, who))
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(foreign) > 0 {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonForeignCSR, "IssueCertificate",
			"CertificateSigningRequests not created by liqo-auth carry this slice's labels: %s; they are never approved", strings.Join(foreign, ", "))
	}
	if is.Cert == nil {
		if is.Reason != authv1beta1.ReasonCertificatePending {
			r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, is.Reason, "IssueCertificate", "%s", is.Message)
			r.Metrics.Certificate(metrics.KindResourceSlice, metrics.OutcomeFailed)
		}
		return ctrl.Result{RequeueAfter: max(is.RequeueAfter, 50*time.Millisecond)}, nil
	}
	return r.publish(ctx, rs, t, who.user, is, now)
}

// publishedFor reports whether the certificate the slice's status publishes is for the
// key and key group of the slice's CSR, issued to user by this provider's CA (the one it
// publishes beside it) and valid at now: a CSR for another key (the consumer switched its
// key) or another form (key-bound instead of Liqo's) is issued at once, not at renewal,
// and so is one for a certificate a status writer put there (which the consumer refuses
// and keeps the one it had). The status is not trusted for more: a forged one only causes
// an issuance for the CSR, which passed every check.
func (r *Reconciler) publishedFor(rs *authv1beta1.ResourceSlice, user string, now time.Time) bool {
	ap := rs.Status.AuthParams
	csr, err := parseCSR(rs.Spec.CSR)
	if err != nil || !bytes.Equal(ap.CA, r.Options.Tenant.CA) {
		return false
	}
	cert, err := authn.VerifyCertificate(ap.SignedCRT, ap.CA, csr.PublicKey, user, now)
	return err == nil && authn.CertificateKeyGroup(cert) == authn.CSRKeyGroup(csr)
}

// beforeSubmit is what is checked again right before the slice's CSR is submitted or
// approved: the Tenant's sealed acceptance, and that the slice's user holds no permission
// this provider did not grant it.
func (r *Reconciler) beforeSubmit(rs *authv1beta1.ResourceSlice, t *authv1beta1.Tenant, who identity) func(ctx context.Context) (*issuer.Issuance, error) {
	return func(ctx context.Context) (*issuer.Issuance, error) {
		keys, err := r.publicKeys(ctx)
		if err != nil {
			return nil, err
		}
		if sealErr := verifySealedByAny(t, keys); sealErr != nil {
			return &issuer.Issuance{Reason: authv1beta1.ReasonSubmissionRefused, Message: sealErr.Error()}, nil //nolint:nilerr // a refusal is an issuance that says why, not a retry
		}
		groups := who.groups(string(t.Spec.ClusterID))
		problems, err := revocation.UnexpectedPermissions(ctx, r.Client, who.user, groups, func(b revocation.Binding) bool {
			return b.Kind == "RoleBinding" && b.Namespace == rs.Namespace && b.Name == wire.SliceAccessName(rs.Name) && b.ControllerUID == string(rs.UID)
		})
		if err != nil || len(problems) == 0 {
			return nil, err
		}
		return &issuer.Issuance{Reason: authv1beta1.ReasonClusterIDHasPermissions, RequeueAfter: time.Minute, Message: fmt.Sprintf(
			"no certificate is issued: user %q with groups %q already has permissions this provider did not grant to the slice: %s", who.user, groups, strings.Join(problems, "; "))}, nil
	}
}

// publish checks an issued certificate, records it in the tenant record and publishes
// it in the slice's status.
func (r *Reconciler) publish(ctx context.Context, rs *authv1beta1.ResourceSlice, t *authv1beta1.Tenant, user string, is *issuer.Issuance, now time.Time) (ctrl.Result, error) {
	if err := checkIssued(is.Cert, rs.Spec.CSR, user, string(t.Spec.ClusterID)); err != nil {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, authv1beta1.ReasonIssuedCertificateBroken, "IssueCertificate", "%v", err)
		return ctrl.Result{}, nil
	}
	if err := cluster.UpdateCachedTenantRecord(ctx, r.Client, r.APIReader, r.Placement.LiqoNamespace, string(t.Spec.ClusterID), false, func(rec *cluster.TenantRecord) error {
		fp, _ := authn.Fingerprint(is.Cert.PublicKey)
		rec.AddCertificate(cluster.IssuedCertificate{Serial: is.Cert.SerialNumber.Text(16), NotAfter: is.Cert.NotAfter, KeyFingerprint: fp, Slice: rs.Name}, now)
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	rs.Status.AuthParams = &authv1beta1.AuthParams{APIServer: r.Options.Tenant.APIServer, CA: r.Options.Tenant.CA, SignedCRT: is.PEM, ProxyURL: t.Spec.ProxyURL}
	rs.Status.Certificate = issuer.CertificateInfo(is.Cert, r.Options.Tenant.RenewBefore)
	r.Recorder.Eventf(rs, nil, corev1.EventTypeNormal, authv1beta1.ReasonCertificateIssued, "IssueCertificate",
		"certificate %s for %q valid until %s", rs.Status.Certificate.SerialNumber, user, is.Cert.NotAfter.UTC().Format(time.RFC3339))
	return ctrl.Result{RequeueAfter: rs.Status.Certificate.RenewAfter.Sub(now)}, nil
}

// checkIssued checks that the signer issued what was asked: the CSR's key, CN and O
// (exactly [org], or org and the CSR's key group for a key-bound identity).
func checkIssued(cert *x509.Certificate, csrPEM []byte, user, org string) error {
	csr, err := authn.ValidateCSRFor(csrPEM, nil, user, org)
	if err != nil {
		return err
	}
	if !authn.PublicKeysEqual(cert.PublicKey, csr.PublicKey) {
		return fmt.Errorf("the signer issued a certificate for another key")
	}
	want := []string{org}
	if g := authn.CSRKeyGroup(csr); g != "" {
		want = append(want, g)
	}
	got := slices.Sorted(slices.Values(cert.Subject.Organization))
	if cert.Subject.CommonName != user || !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		return fmt.Errorf("the signer issued a certificate for %q, not CN=%s, O=%s", cert.Subject, user, strings.Join(want, "+"))
	}
	return nil
}

// finalize removes what the slice caused, and only that: the Role and RoleBinding it
// controls and the CertificateSigningRequests this manager made for it, for every slice
// being deleted, the manager's finalizer on it or not: the tenant writes its slices, and
// may take the finalizer off and keep one of its own (ownedrbac.Finalize).
func (r *Reconciler) finalize(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	return ownedrbac.Finalize(ctx, r.Client, r.APIReader, r.Issuer, rs, wire.ProviderSliceFinalizer, sliceAccessByName(rs.Namespace, rs.Name))
}
