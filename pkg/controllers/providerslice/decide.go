package providerslice

import (
	"context"
	"crypto"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/liqo-auth/liqo-auth/pkg/access"
	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/placement"
)

// stage is how much of a decision's input is loaded. Each stage is loaded only once every
// check before the first check that needs it passed: a slice denied early causes no
// further read (a stray slice is worth no request to the API server, and the namespaces
// the manager may read are those of its tenants), and the finalizer goes only on a slice
// in its place.
type stage int

const (
	// stageSlice: the slice alone.
	stageSlice stage = iota
	// stagePlacement: whether the slice's namespace is its consumer's tenant namespace.
	stagePlacement
	// stageFinalizer: the slice, in its place, carries the finalizer (the one write made
	// before the decision: what the slice causes from here on is removed with it).
	stageFinalizer
	// stageTenant: the consumer's Tenant.
	stageTenant
	// stageState: the tenant's administrative state in force.
	stageState
	// stageGrants: what this provider granted the tenant's slices (their Roles).
	stageGrants
	// stageUser: whether a tenant record bears the slice user's name.
	stageUser
	// stageCount: the tenant's other slices, for their number.
	stageCount
	// stageLimits: the limits the administrator set for the tenant.
	stageLimits
)

// input is everything a slice's decision reads. Nothing in it is trusted for what the
// slice says: id and the slice's spec are the tenant's words; placement, state, grants
// and limits come from this provider's records and Roles.
type input struct {
	slice *authv1beta1.ResourceSlice
	// id is the consumer the slice says it is from (access.SliceConsumer).
	id string
	// user is the slice identity's user name, <slice>-<hash of id>.
	user string
	// opts are the reconciler's options (classes, HonorNoHandshake, MaxPerTenant).
	opts Options
	// providerKeys verify the seal of the Tenant's acceptance (any of them: a rotation
	// changes the key that seals); read with the Tenant.
	providerKeys []crypto.PublicKey

	// loaded is the last stage loaded.
	loaded stage
	// placed: the namespace is the consumer's tenant namespace; misplaced says why not.
	placed    bool
	misplaced string
	// tenant is the consumer's Tenant in the slice's namespace (nil: there is none).
	tenant *authv1beta1.Tenant
	// state is the administrative state in force for the tenant.
	state authv1beta1.TenantCondition
	// grants are what this provider granted the namespace's slices, by slice UID.
	grants map[types.UID]corev1.ResourceList
	// userIsConsumer: a tenant record is named like the slice's user (read only for a
	// slice not granted yet).
	userIsConsumer bool
	// siblings are the namespace's provider copies of slices (read only for a slice not
	// granted yet); they are the cache's own objects: read, never written.
	siblings []authv1beta1.ResourceSlice
	// limits are what the administrator lets the tenant hold (read only when the slice
	// does not keep what it was granted; empty: no limit).
	limits corev1.ResourceList
}

// newInput is the input of a decision on rs from consumer id, nothing loaded yet.
func (r *Reconciler) newInput(rs *authv1beta1.ResourceSlice, id string) *input {
	return &input{slice: rs, id: id, user: authn.SliceUserName(rs.Name, id), opts: r.Options}
}

// granted returns what this provider granted the slice, and whether it granted anything.
func (in *input) granted() (corev1.ResourceList, bool) {
	mine, ok := in.grants[in.slice.UID]
	return mine, ok
}

// keepsGrant reports whether the slice asks exactly for what it was granted.
func (in *input) keepsGrant() bool {
	mine, ok := in.granted()
	return ok && equality.Semantic.DeepEqual(mine, in.slice.Spec.Resources)
}

// tenantKey is the key a slice's CSR must be for: the Tenant's accepted one, or nil when
// the manager honors the Tenant's TolerateNoHandshake policy (the match is then skipped).
func (in *input) tenantKey() (crypto.PublicKey, error) {
	if in.opts.HonorNoHandshake && ptr.Deref(in.tenant.Spec.AuthzPolicy, authv1beta1.KeysExchange) == authv1beta1.TolerateNoHandshake {
		return nil, nil
	}
	return authn.ParsePublicKey(in.tenant.Spec.PublicKey)
}

// load brings in up to stage s, in order, each stage once.
func (r *Reconciler) load(ctx context.Context, in *input, s stage) error {
	for in.loaded < s {
		next := in.loaded + 1
		if err := r.loadStage(ctx, in, next); err != nil {
			return err
		}
		in.loaded = next
	}
	return nil
}

// loadStage reads what stage s adds to in.
func (r *Reconciler) loadStage(ctx context.Context, in *input, s stage) error {
	switch s {
	case stagePlacement:
		ok, why, err := r.Placement.Verify(ctx, in.slice.Namespace, in.id)
		in.placed, in.misplaced = ok, why
		return err
	case stageFinalizer:
		return r.ensureFinalizer(ctx, in.slice)
	case stageTenant:
		if err := r.loadTenant(ctx, in); err != nil || in.tenant == nil {
			return err
		}
		keys, err := r.publicKeys(ctx) // without a key no seal verifies: the Tenant check denies
		in.providerKeys = keys
		return err
	case stageState:
		state, err := placement.TenantState(ctx, r.Client, r.Placement.LiqoNamespace, in.tenant)
		in.state = state
		return err
	case stageGrants:
		// What this provider granted is read from its own record of the grant (the
		// slices' Roles), never from a slice's status, which others may write.
		grants, err := r.grants(ctx, in.slice.Namespace)
		in.grants = grants
		return err
	case stageUser:
		return r.loadUser(ctx, in)
	case stageCount:
		return r.loadSiblings(ctx, in)
	case stageLimits:
		return r.loadLimits(ctx, in)
	}
	return nil
}

// ensureFinalizer puts the finalizer on a slice in its place: a stray one causes nothing,
// so it needs none. The patch carries the slice's resourceVersion: it lands only on the
// slice decided on, not on one made again under its name since, nor over finalizers
// changed since (a merge patch replaces the whole list).
func (r *Reconciler) ensureFinalizer(ctx context.Context, rs *authv1beta1.ResourceSlice) error {
	if controllerutil.ContainsFinalizer(rs, wire.ProviderSliceFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(rs.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(rs, wire.ProviderSliceFinalizer)
	return r.Client.Patch(ctx, rs, patch)
}

// loadTenant reads the consumer's Tenant in the slice's namespace; none is no error.
func (r *Reconciler) loadTenant(ctx context.Context, in *input) error {
	t := &authv1beta1.Tenant{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: in.slice.Namespace, Name: in.id}, t); err != nil {
		return client.IgnoreNotFound(err)
	}
	in.tenant = t
	return nil
}

// loadUser reads, for a slice not granted yet, whether a consumer's tenant record bears
// its user's name: a slice granted before keeps its name whatever came since.
func (r *Reconciler) loadUser(ctx context.Context, in *input) error {
	if _, granted := in.granted(); granted {
		return nil
	}
	rec, err := cluster.GetTenantRecord(ctx, r.Client, r.Placement.LiqoNamespace, in.user)
	in.userIsConsumer = rec != nil
	return err
}

// loadSiblings lists, for a slice not granted yet, the provider copies of slices in its
// namespace (the cache's objects, not copied: they are only counted).
func (r *Reconciler) loadSiblings(ctx context.Context, in *input) error {
	if _, granted := in.granted(); granted {
		return nil
	}
	var list authv1beta1.ResourceSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(in.slice.Namespace), client.MatchingLabels{wire.ReplicationStatusLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	in.siblings = list.Items
	return nil
}

// loadLimits reads the tenant's limits from its record, through the API server, unless
// the slice keeps what it was granted (then no limit applies to it).
func (r *Reconciler) loadLimits(ctx context.Context, in *input) error {
	if in.keepsGrant() {
		return nil
	}
	rec, err := cluster.GetTenantRecord(ctx, r.APIReader, r.Placement.LiqoNamespace, in.id)
	if err != nil || rec == nil {
		return err
	}
	in.limits = rec.SliceLimits
	return nil
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

// verdict is the first failed check's: the condition it denies, or the slice's deletion.
type verdict struct {
	// check names the check that failed.
	check string
	// typ is the condition denied (Authentication or Resources), reason and msg its own.
	typ, reason, msg string
	// authenticated: every Authentication check passed; a Resources denial then accepts
	// Authentication first.
	authenticated bool
	// drained: the slice is not denied but deleted (its tenant is Drained).
	drained bool
}

// check is one rule of the decision: it reads only in, loaded up to needs, and returns
// nil when the slice passes it.
type check struct {
	name  string
	needs stage
	// authenticated: every Authentication check comes before this one.
	authenticated bool
	run           func(in *input) *verdict
}

// checks are the rules a slice must pass, in the order they are asked: the first that
// fails decides. Who the slice is from (its name, place, Tenant, state, key and CSR)
// comes before what it asks for (count, quantities, class, limits).
func checks() []check {
	return []check{
		{name: "clusterID", needs: stageSlice, run: checkClusterID},
		{name: "sliceName", needs: stageSlice, run: checkSliceName},
		{name: "placement", needs: stagePlacement, run: checkPlacement},
		{name: "tenantExists", needs: stageTenant, run: checkTenantExists},
		{name: "tenantAccepted", needs: stageTenant, run: checkTenantAccepted},
		{name: "drained", needs: stageState, run: checkDrained},
		{name: "cordonedNew", needs: stageGrants, run: checkCordonedNew},
		{name: "cordonedKeeps", needs: stageGrants, run: checkCordonedKeeps},
		{name: "tenantKey", needs: stageGrants, run: checkTenantKey},
		{name: "csr", needs: stageGrants, run: checkCSR},
		{name: "userNotConsumer", needs: stageUser, run: checkUserNotConsumer},
		{name: "count", needs: stageCount, authenticated: true, run: checkCount},
		{name: "negative", needs: stageCount, authenticated: true, run: checkNegative},
		{name: "class", needs: stageCount, authenticated: true, run: checkClass},
		{name: "limits", needs: stageLimits, authenticated: true, run: checkLimits},
	}
}

// firstFailure asks the checks in order, each once load brought in what it needs, and
// returns the first failure (nil: the slice passes them all).
func firstFailure(in *input, load func(stage) error) (*verdict, error) {
	for _, c := range checks() {
		if err := load(c.needs); err != nil {
			return nil, err
		}
		if v := c.run(in); v != nil {
			v.check, v.authenticated = c.name, c.authenticated
			return v, nil
		}
	}
	return nil, nil
}

// authDenied is a denial of the slice's Authentication.
func authDenied(msg string) *verdict {
	return &verdict{typ: authv1beta1.ResourceSliceConditionAuthentication, reason: authv1beta1.ReasonSliceAuthenticationDenied, msg: msg}
}

// resourcesDenied is a denial of the slice's Resources.
func resourcesDenied(reason, msg string) *verdict {
	return &verdict{typ: authv1beta1.ResourceSliceConditionResources, reason: reason, msg: msg}
}

func checkClusterID(in *input) *verdict {
	if err := cluster.ValidateClusterID(in.id); err != nil {
		return authDenied(fmt.Sprintf("spec.consumerClusterID: %v", err))
	}
	return nil
}

func checkSliceName(in *input) *verdict {
	if err := wire.ValidateSliceName(in.slice.Name); err != nil {
		return authDenied(err.Error())
	}
	return nil
}

func checkPlacement(in *input) *verdict {
	if !in.placed {
		return authDenied(in.misplaced + ": a ResourceSlice is decided only in the tenant namespace of its consumer")
	}
	return nil
}

func checkTenantExists(in *input) *verdict {
	if in.tenant == nil {
		return authDenied(fmt.Sprintf("there is no Tenant %s/%s: the consumer must authenticate first", in.slice.Namespace, in.id))
	}
	return nil
}

// checkTenantAccepted asks for an acceptance sealed by this provider: the Tenant's status
// alone is anyone's who may write it.
func checkTenantAccepted(in *input) *verdict {
	t := in.tenant
	if t.Status.AcceptedKeyFingerprint == "" || verifySealedByAny(t, in.providerKeys) != nil {
		return authDenied(fmt.Sprintf("Tenant %s/%s is not accepted by this provider", t.Namespace, t.Name))
	}
	return nil
}

func checkDrained(in *input) *verdict {
	if in.state == authv1beta1.TenantConditionDrained {
		return &verdict{drained: true}
	}
	return nil
}

func checkCordonedNew(in *input) *verdict {
	if _, granted := in.granted(); in.state == authv1beta1.TenantConditionCordoned && !granted {
		return authDenied(fmt.Sprintf("Tenant %s/%s is Cordoned: it gets no new ResourceSlice", in.tenant.Namespace, in.tenant.Name))
	}
	return nil
}

// checkCordonedKeeps lets a Cordoned tenant's slice keep what it was granted, no more.
func checkCordonedKeeps(in *input) *verdict {
	if mine, granted := in.granted(); in.state == authv1beta1.TenantConditionCordoned && granted && !in.keepsGrant() {
		return resourcesDenied(authv1beta1.ReasonSliceResourcesDenied,
			fmt.Sprintf("Tenant %s/%s is Cordoned: its slices keep what they were granted (%s)", in.tenant.Namespace, in.tenant.Name, authv1beta1.FormatResources(mine)))
	}
	return nil
}

func checkTenantKey(in *input) *verdict {
	if _, err := in.tenantKey(); err != nil {
		return authDenied(err.Error())
	}
	return nil
}

func checkCSR(in *input) *verdict {
	pub, _ := in.tenantKey() // checkTenantKey passed
	if _, err := authn.ValidateCSRFor(in.slice.Spec.CSR, pub, in.user, in.id); err != nil {
		return authDenied(fmt.Sprintf("spec.csr: %v", err))
	}
	return nil
}

// checkUserNotConsumer: a slice user is <slice>-<hash>, which a consumer's cluster ID may
// equal: that cluster's grants would be this identity's too. Whichever came first keeps
// its name: a slice granted before is not taken back (the Tenant of that cluster ID is
// refused).
func checkUserNotConsumer(in *input) *verdict {
	if _, granted := in.granted(); !granted && in.userIsConsumer {
		return authDenied(fmt.Sprintf("the slice's user %q is the cluster ID of a consumer of this provider: name the slice otherwise", in.user))
	}
	return nil
}

// checkCount denies a slice not granted yet that is one too many for its tenant: the
// first MaxPerTenant slices of a tenant namespace, oldest first, may be decided; any later
// one is denied until others are deleted.
func checkCount(in *input) *verdict {
	if _, granted := in.granted(); granted {
		return nil
	}
	limit := in.opts.MaxPerTenant
	if limit <= 0 {
		limit = DefaultMaxPerTenant
	}
	if len(in.siblings) <= limit {
		return nil
	}
	rs, older := in.slice, 0
	for i := range in.siblings {
		o := &in.siblings[i]
		if o.DeletionTimestamp == nil && (o.CreationTimestamp.Before(&rs.CreationTimestamp) || o.CreationTimestamp.Equal(&rs.CreationTimestamp) && o.Name < rs.Name) {
			older++
		}
	}
	if older < limit {
		return nil
	}
	return resourcesDenied(authv1beta1.ReasonSliceResourcesDenied,
		fmt.Sprintf("the tenant holds %d ResourceSlices, and this provider decides at most %d per tenant: delete others first", len(in.siblings), limit))
}

// checkNegative denies negative quantities: a negative slice would make room under the
// tenant's limits for the others. This project's CRD refuses them; a CRD installed by
// Liqo's chart does not.
func checkNegative(in *input) *verdict {
	var bad []string
	for n, q := range in.slice.Spec.Resources {
		if q.Sign() < 0 {
			bad = append(bad, fmt.Sprintf("%s=%s", n, q.String()))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return resourcesDenied(authv1beta1.ReasonSliceResourcesDenied, "a slice asks for no negative quantity: "+strings.Join(bad, ", "))
}

// checkClass denies a class this provider does not offer.
func checkClass(in *input) *verdict {
	classes := in.opts.Classes
	switch class := string(in.slice.Spec.Class); {
	case class == "" || class == DefaultClass:
		if in.opts.DisableDefaultClass {
			return resourcesDenied(authv1beta1.ReasonDefaultSliceClassDisabled, "this provider offers no default class: ask for one of "+strings.Join(classes, ", "))
		}
	case !slices.Contains(classes, class):
		offered := append([]string{}, classes...)
		if !in.opts.DisableDefaultClass {
			offered = append([]string{DefaultClass}, offered...)
		}
		return resourcesDenied(authv1beta1.ReasonSliceResourcesDenied, fmt.Sprintf("class %q is not offered by this provider (offered: %s)", class, strings.Join(offered, ", ")))
	}
	return nil
}

// checkLimits denies resources that do not fit in what the provider's administrator lets
// the tenant hold: what was granted to its other slices plus these. A slice already
// granted what it asks keeps it.
func checkLimits(in *input) *verdict {
	if in.keepsGrant() || len(in.limits) == 0 {
		return nil
	}
	used := corev1.ResourceList{}
	for uid, l := range in.grants {
		if uid == in.slice.UID {
			continue
		}
		for n, q := range l {
			sum := used[n]
			sum.Add(q)
			used[n] = sum
		}
	}
	var over []string
	for n, limit := range in.limits {
		want, ok := in.slice.Spec.Resources[n]
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
		return nil
	}
	slices.Sort(over)
	return resourcesDenied(authv1beta1.ReasonSliceResourcesDenied, "the slice does not fit in the tenant's limits (liqoctl limit tenant on the provider): "+strings.Join(over, "; "))
}
