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
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
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
	// Key is this cluster's key: Tenant acceptances are sealed with it.
	Key crypto.Signer
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

// SetupWithManager registers the reconciler: the slices consumers copied here, what they
// cause (Roles, RoleBindings, CSRs), and the Tenants they depend on.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := wiring.NewController(mgr, "providerslice", access.Provider).
		For(&authv1beta1.ResourceSlice{}, predicate.NewPredicateFuncs(isProviderCopy)).
		Owns(&rbacv1.RoleBinding{}, &authv1beta1.ResourceSlice{}).
		Owns(&rbacv1.Role{}, &authv1beta1.ResourceSlice{}).
		Watches(&certificatesv1.CertificateSigningRequest{}, handler.EnqueueRequestsFromMapFunc(csrToSlice),
			wiring.HasLabel(wire.ManagedByLabel, wire.ManagedByValue)).
		Watches(&authv1beta1.Tenant{}, handler.EnqueueRequestsFromMapFunc(wiring.InNamespaceOf(mgr.GetClient(), func() *authv1beta1.ResourceSliceList { return &authv1beta1.ResourceSliceList{} }, isProviderCopy))).
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
	}), wiring.HasLabel(wire.TenantRecordLabel, "true")).
		Reads(&corev1.Namespace{})
	return b.Complete(r)
}

func csrToSlice(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(o.GetAnnotations()[wire.SliceAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Reconcile decides one slice.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &authv1beta1.ResourceSlice{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	id, providerCopy := access.SliceConsumer(rs)
	if !providerCopy || id == r.ClusterID {
		return ctrl.Result{}, nil
	}
	if rs.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, rs)
	}
	mu, _ := r.tenantLocks.LoadOrStore(rs.Namespace, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	before := rs.Status.DeepCopy()
	res, deleted, err := r.decide(ctx, rs, id)
	if err != nil || deleted {
		return ctrl.Result{}, err
	}
	rs.Status.ObservedGeneration = rs.Generation
	if !equality.Semantic.DeepEqual(before, &rs.Status) {
		if err := r.Client.Status().Update(ctx, rs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if now := rs.Status.Certificate; now != nil && (before.Certificate == nil || before.Certificate.SerialNumber != now.SerialNumber) {
			outcome := metrics.OutcomeIssued
			if before.Certificate != nil {
				outcome = metrics.OutcomeRenewed
			}
			r.Metrics.Certificate(metrics.KindResourceSlice, outcome)
		}
	}
	return res, nil
}

// deny records a denial of type typ (and of Authentication, when typ is Resources and
// nothing was accepted yet), with a Warning Event when it is new.
func (r *Reconciler) deny(rs *authv1beta1.ResourceSlice, typ, reason, msg string) {
	now := metav1.NewTime(r.Now())
	if authv1beta1.SetSliceCondition(&rs.Status.Conditions, typ, authv1beta1.ResourceSliceDenied, reason, msg, now) {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeWarning, reason, "DecideResourceSlice", "%s", msg)
	}
}

func (r *Reconciler) accept(rs *authv1beta1.ResourceSlice, typ, reason, msg string) {
	now := metav1.NewTime(r.Now())
	if authv1beta1.SetSliceCondition(&rs.Status.Conditions, typ, authv1beta1.ResourceSliceAccepted, reason, msg, now) {
		r.Recorder.Eventf(rs, nil, corev1.EventTypeNormal, reason, "DecideResourceSlice", "%s", msg)
	}
}

// decide computes the slice's status; deleted says the slice was deleted (its tenant is
// Drained).
func (r *Reconciler) decide(ctx context.Context, rs *authv1beta1.ResourceSlice, id string) (ctrl.Result, bool, error) {
	authDenied := func(msg string) (ctrl.Result, bool, error) {
		r.deny(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationDenied, msg)
		return ctrl.Result{}, false, nil
	}
	if err := cluster.ValidateClusterID(id); err != nil {
		return authDenied(fmt.Sprintf("spec.consumerClusterID: %v", err))
	}
	if err := wire.ValidateSliceName(rs.Name); err != nil {
		return authDenied(err.Error())
	}
	ok, why, err := r.Placement.Verify(ctx, rs.Namespace, id)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if !ok {
		return authDenied(why + ": a ResourceSlice is decided only in the tenant namespace of its consumer")
	}
	// Only a slice in its place gets the finalizer: a stray one causes nothing.
	if !controllerutil.ContainsFinalizer(rs, wire.ProviderSliceFinalizer) {
		patch := client.MergeFrom(rs.DeepCopy())
		controllerutil.AddFinalizer(rs, wire.ProviderSliceFinalizer)
		if err := r.Client.Patch(ctx, rs, patch); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	t := &authv1beta1.Tenant{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: id}, t); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, false, err
		}
		return authDenied(fmt.Sprintf("there is no Tenant %s/%s: the consumer must authenticate first", rs.Namespace, id))
	}
	if t.Status.AcceptedKeyFingerprint == "" || acceptance.VerifySealed(t, r.Key.Public()) != nil {
		return authDenied(fmt.Sprintf("Tenant %s/%s is not accepted by this provider", t.Namespace, t.Name))
	}
	state, err := placement.TenantState(ctx, r.Client, r.Placement.LiqoNamespace, t)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	switch state {
	case authv1beta1.TenantConditionDrained:
		err := r.Client.Delete(ctx, rs)
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, authv1beta1.ReasonSliceDeletedDrained, "DrainTenant", "ResourceSlice %s deleted: the tenant is Drained", rs.Name)
		return ctrl.Result{}, true, client.IgnoreNotFound(err)
	}
	// What this provider granted is read from its own record of the grant (the slices'
	// Roles), never from a slice's status, which others may write.
	grants, err := r.grants(ctx, rs.Namespace)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	mine, granted := grants[rs.UID]
	if state == authv1beta1.TenantConditionCordoned {
		if !granted {
			return authDenied(fmt.Sprintf("Tenant %s/%s is Cordoned: it gets no new ResourceSlice", t.Namespace, t.Name))
		}
		if !equality.Semantic.DeepEqual(mine, rs.Spec.Resources) {
			r.deny(rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied,
				fmt.Sprintf("Tenant %s/%s is Cordoned: its slices keep what they were granted (%s)", t.Namespace, t.Name, authv1beta1.FormatResources(mine)))
			return ctrl.Result{}, false, nil
		}
	}
	user := authn.SliceUserName(rs.Name, id)
	var pub crypto.PublicKey
	if !r.Options.HonorNoHandshake || ptr.Deref(t.Spec.AuthzPolicy, authv1beta1.KeysExchange) != authv1beta1.TolerateNoHandshake {
		if pub, err = authn.ParsePublicKey(t.Spec.PublicKey); err != nil {
			return authDenied(err.Error())
		}
	}
	if _, err := authn.ValidateCSRFor(rs.Spec.CSR, pub, user, id); err != nil {
		return authDenied(fmt.Sprintf("spec.csr: %v", err))
	}
	// A slice user is <slice>-<hash>, which a consumer's cluster ID may equal: that
	// cluster's grants would be this identity's too. Whichever came first keeps its name:
	// a slice granted before is not taken back (the Tenant of that cluster ID is refused).
	if rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, user); !granted && (err != nil || rec != nil) {
		if err != nil {
			return ctrl.Result{}, false, err
		}
		return authDenied(fmt.Sprintf("the slice's user %q is the cluster ID of a consumer of this provider: name the slice otherwise", user))
	}
	if !granted {
		if msg, err := r.checkCount(ctx, rs); err != nil || msg != "" {
			if err != nil {
				return ctrl.Result{}, false, err
			}
			r.accept(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationAccepted, "the slice's CSR is for the consumer's accepted key")
			r.deny(rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, msg)
			return ctrl.Result{}, false, nil
		}
	}
	if msg := negativeResources(rs.Spec.Resources); msg != "" {
		r.accept(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationAccepted, "the slice's CSR is for the consumer's accepted key")
		r.deny(rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, msg)
		return ctrl.Result{}, false, nil
	}
	if reason, msg := r.checkClass(rs); reason != "" {
		r.accept(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationAccepted, "the slice's CSR is for the consumer's accepted key")
		r.deny(rs, authv1beta1.ResourceSliceConditionResources, reason, msg)
		return ctrl.Result{}, false, nil
	}
	if msg, err := r.checkLimits(ctx, rs, id, grants); err != nil || msg != "" {
		if err != nil {
			return ctrl.Result{}, false, err
		}
		r.accept(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationAccepted, "the slice's CSR is for the consumer's accepted key")
		r.deny(rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesDenied, msg)
		return ctrl.Result{}, false, nil
	}
	class := rs.Spec.Class
	if class == "" {
		class = DefaultClass
	}
	rs.Status.Class, rs.Status.Resources = authv1beta1.ResourceSliceClass(class), rs.Spec.Resources.DeepCopy()
	r.accept(rs, authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ReasonSliceAuthenticationAccepted,
		fmt.Sprintf("identity %q (group %q) for the consumer's accepted key", user, id))
	r.accept(rs, authv1beta1.ResourceSliceConditionResources, authv1beta1.ReasonSliceResourcesAccepted,
		fmt.Sprintf("class %q, resources as requested", class))
	if _, err := ownedrbac.EnsureControlled(ctx, r.Client, r.APIReader, rs, access.SliceAccessObjects(rs.Namespace, rs.Name, user, id, rs.Spec.Resources), state == authv1beta1.TenantConditionCordoned); err != nil {
		return ctrl.Result{}, false, err
	}
	res, err := r.certificate(ctx, rs, t, user, pub)
	return res, false, err
}

// checkClass says why the slice's class is not offered ("" when it is).
func (r *Reconciler) checkClass(rs *authv1beta1.ResourceSlice) (reason, msg string) {
	switch class := string(rs.Spec.Class); {
	case class == "" || class == DefaultClass:
		if r.Options.DisableDefaultClass {
			return authv1beta1.ReasonDefaultSliceClassDisabled, "this provider offers no default class: ask for one of " + strings.Join(r.Options.Classes, ", ")
		}
	case !slices.Contains(r.Options.Classes, class):
		offered := append([]string{}, r.Options.Classes...)
		if !r.Options.DisableDefaultClass {
			offered = append([]string{DefaultClass}, offered...)
		}
		return authv1beta1.ReasonSliceResourcesDenied, fmt.Sprintf("class %q is not offered by this provider (offered: %s)", class, strings.Join(offered, ", "))
	}
	return "", ""
}

// grants reads from the API server what this provider granted the slices of namespace ns,
// by slice UID: the resources recorded on each slice's Role that a slice controls. The
// tenant may write its slices and their status, never a Role.
func (r *Reconciler) grants(ctx context.Context, ns string) (map[types.UID]corev1.ResourceList, error) {
	var roles rbacv1.RoleList
	if err := r.APIReader.List(ctx, &roles, client.InNamespace(ns), client.MatchingLabels{wire.ManagedByLabel: wire.ManagedByValue}); err != nil {
		return nil, err
	}
	out := map[types.UID]corev1.ResourceList{}
	for i := range roles.Items {
		role := &roles.Items[i]
		ref := metav1.GetControllerOf(role)
		if ref == nil || ref.Kind != "ResourceSlice" || role.Labels[wire.SliceNameLabel] != ref.Name {
			continue
		}
		if l, ok := access.SliceGrant(role); ok {
			out[ref.UID] = l
		}
	}
	return out, nil
}

// checkLimits says why the slice's resources do not fit in what the provider's
// administrator lets the tenant hold ("" when they fit, or when no limit is set): what
// was granted to its other slices (grants) plus these. A slice already granted what it
// asks keeps it.
func (r *Reconciler) checkLimits(ctx context.Context, rs *authv1beta1.ResourceSlice, id string, grants map[types.UID]corev1.ResourceList) (string, error) {
	if mine, ok := grants[rs.UID]; ok && equality.Semantic.DeepEqual(mine, rs.Spec.Resources) {
		return "", nil
	}
	rec, err := cluster.GetTenantRecord(ctx, r.APIReader, r.Placement.LiqoNamespace, id)
	if err != nil || rec == nil || len(rec.SliceLimits) == 0 {
		return "", err
	}
	used := corev1.ResourceList{}
	for uid, l := range grants {
		if uid == rs.UID {
			continue
		}
		for n, q := range l {
			sum := used[n]
			sum.Add(q)
			used[n] = sum
		}
	}
	var over []string
	for n, limit := range rec.SliceLimits {
		want, ok := rs.Spec.Resources[n]
		if !ok {
			continue
		}
		total := used[n]
		total.Add(want)
		if total.Cmp(limit) > 0 {
			inUse := used[n]
			over = append(over, fmt.Sprintf("%s=%s asked, %s of the %s this tenant may hold already granted", n, want.String(), inUse.String(), limit.String()))
		}
	}
	if len(over) == 0 {
		return "", nil
	}
	slices.Sort(over)
	return "the slice does not fit in the tenant's limits (liqoctl limit tenant on the provider): " + strings.Join(over, "; "), nil
}

// certificate has the slice's identity certificate issued or renewed and published.
func (r *Reconciler) certificate(ctx context.Context, rs *authv1beta1.ResourceSlice, t *authv1beta1.Tenant, user string, pub crypto.PublicKey) (ctrl.Result, error) {
	now := r.Now()
	cur := rs.Status.Certificate
	if rs.Status.AuthParams.HasCertificate() && cur != nil && cur.RenewAfter != nil && now.Before(cur.RenewAfter.Time) {
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
	is, foreign, err := r.Issuer.Ensure(ctx, s, now, func(ctx context.Context) (*issuer.Issuance, error) {
		if err := acceptance.VerifySealed(t, r.Key.Public()); err != nil {
			return &issuer.Issuance{Reason: authv1beta1.ReasonSubmissionRefused, Message: err.Error()}, nil
		}
		problems, err := revocation.UnexpectedPermissions(ctx, r.Client, user, []string{string(t.Spec.ClusterID)}, func(b revocation.Binding) bool {
			return b.Kind == "RoleBinding" && b.Namespace == rs.Namespace && b.Name == wire.SliceAccessName(rs.Name) && b.ControllerUID == string(rs.UID)
		})
		if err != nil || len(problems) == 0 {
			return nil, err
		}
		return &issuer.Issuance{Reason: authv1beta1.ReasonClusterIDHasPermissions, RequeueAfter: time.Minute, Message: fmt.Sprintf(
			"no certificate is issued: user %q with group %q already has permissions this provider did not grant to the slice: %s", user, t.Spec.ClusterID, strings.Join(problems, "; "))}, nil
	})
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

// checkIssued checks that the signer issued what was asked: the CSR's key, CN and O.
func checkIssued(cert *x509.Certificate, csrPEM []byte, user, org string) error {
	csr, err := authn.ValidateCSRFor(csrPEM, nil, user, org)
	if err != nil {
		return err
	}
	if !authn.PublicKeysEqual(cert.PublicKey, csr.PublicKey) {
		return fmt.Errorf("the signer issued a certificate for another key")
	}
	if cert.Subject.CommonName != user || !slices.Equal(cert.Subject.Organization, []string{org}) {
		return fmt.Errorf("the signer issued a certificate for %q, not CN=%s, O=%s", cert.Subject, user, org)
	}
	return nil
}

// finalize removes what the slice caused, and only that: the Role and RoleBinding it
// controls and the CertificateSigningRequests this manager made for it.
func (r *Reconciler) finalize(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	if !controllerutil.ContainsFinalizer(rs, wire.ProviderSliceFinalizer) {
		return nil
	}
	id, _ := access.SliceConsumer(rs)
	if err := ownedrbac.DeleteControlled(ctx, r.Client, r.APIReader, rs, access.SliceAccessObjects(rs.Namespace, rs.Name, authn.SliceUserName(rs.Name, id), id, nil)); err != nil {
		return err
	}
	if err := r.Issuer.DeleteCSRs(ctx, r.APIReader, rs.UID, false); err != nil {
		return err
	}
	r.Issuer.Forget(rs.UID)
	patch := client.MergeFrom(rs.DeepCopy())
	controllerutil.RemoveFinalizer(rs, wire.ProviderSliceFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, rs, patch))
}

// negativeResources says which quantities a slice asks for are negative ("" when none):
// a negative slice would make room under the tenant's limits for the others. This
// project's CRD refuses them; a CRD installed by Liqo's chart does not.
func negativeResources(l corev1.ResourceList) string {
	var bad []string
	for n, q := range l {
		if q.Sign() < 0 {
			bad = append(bad, fmt.Sprintf("%s=%s", n, q.String()))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return "a slice asks for no negative quantity: " + strings.Join(bad, ", ")
}

// checkCount says why a slice not granted yet is one too many for its tenant ("" when it
// is not): the first MaxPerTenant slices of a tenant namespace, oldest first, may be
// decided; any later one is denied until others are deleted.
func (r *Reconciler) checkCount(ctx context.Context, rs *authv1beta1.ResourceSlice) (string, error) {
	limit := r.Options.MaxPerTenant
	if limit <= 0 {
		limit = DefaultMaxPerTenant
	}
	var list authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(rs.Namespace), client.MatchingLabels{wire.ReplicationStatusLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return "", err
	}
	if len(list.Items) <= limit {
		return "", nil
	}
	older := 0
	for i := range list.Items {
		o := &list.Items[i]
		if o.DeletionTimestamp == nil && (o.CreationTimestamp.Before(&rs.CreationTimestamp) || o.CreationTimestamp.Equal(&rs.CreationTimestamp) && o.Name < rs.Name) {
			older++
		}
	}
	if older < limit {
		return "", nil
	}
	return fmt.Sprintf("the tenant holds %d ResourceSlices, and this provider decides at most %d per tenant: delete others first", len(list.Items), limit), nil
}
