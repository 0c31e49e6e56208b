package providerslice

import (
	"crypto"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/acceptance"
)

const (
	testLiqoNS = "liqo"
	testID     = "consumer-a"
	testNS     = "liqo-tenant-consumer-a"
	testSlice  = "slice-1"
	testUID    = types.UID("slice-uid")
)

// keys are a provider's and a consumer's cluster keys.
type keys struct {
	provider, consumer crypto.Signer
}

func newKeys(t *testing.T) keys {
	t.Helper()
	p, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	c, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return keys{provider: p, consumer: c}
}

// acceptedTenant is consumer testID's Tenant, its handshake accepted and sealed by the
// provider's key.
func acceptedTenant(t *testing.T, k keys) *authv1beta1.Tenant {
	t.Helper()
	pubPEM, err := authn.MarshalPublicKey(k.consumer.Public())
	if err != nil {
		t.Fatal(err)
	}
	csr, err := authn.ForgeCSR(k.consumer, testID)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := authn.Fingerprint(k.consumer.Public())
	if err != nil {
		t.Fatal(err)
	}
	tn := &authv1beta1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testID, UID: "tenant-uid"},
		Spec:       authv1beta1.TenantSpec{ClusterID: testID, PublicKey: pubPEM, CSR: csr},
	}
	seal, err := authn.SealAcceptance(k.provider, authn.Acceptance{TenantUID: string(tn.UID), ClusterID: testID, KeyFingerprint: fp, CSRDigest: acceptance.CSRDigest(csr)})
	if err != nil {
		t.Fatal(err)
	}
	tn.Status = authv1beta1.TenantStatus{AcceptedKeyFingerprint: fp, AcceptedCSRDigest: acceptance.CSRDigest(csr), AcceptanceSeal: seal}
	return tn
}

// providerCopy is slice name of consumer testID as the consumer writes it into the
// provider: its CSR for the slice's user with the consumer's key, one CPU.
func providerCopy(t *testing.T, k keys, name string) *authv1beta1.ResourceSlice {
	t.Helper()
	csr, err := authn.ForgeCSRFor(k.consumer, authn.SliceUserName(name, testID), testID)
	if err != nil {
		t.Fatal(err)
	}
	return &authv1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID(name + "-uid"), Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			Labels:            map[string]string{wire.ReplicationStatusLabel: "true", wire.RemoteClusterIDLabel: testID}},
		Spec: authv1beta1.ResourceSliceSpec{ConsumerClusterID: ptr.To(authv1beta1.ClusterID(testID)), CSR: csr,
			Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}
}

// passingInput is an input, loaded in full, that passes every check.
func passingInput(t *testing.T) *input {
	t.Helper()
	k := newKeys(t)
	rs := providerCopy(t, k, testSlice)
	rs.UID = testUID
	return &input{slice: rs, id: testID, user: authn.SliceUserName(testSlice, testID), opts: Options{Classes: []string{"gold"}},
		providerKeys: []crypto.PublicKey{k.provider.Public()}, loaded: stageLimits, placed: true, tenant: acceptedTenant(t, k),
		state: authv1beta1.TenantConditionActive, grants: map[types.UID]corev1.ResourceList{},
		siblings: []authv1beta1.ResourceSlice{*rs}}
}

func TestEveryCheckPassesAPassingInput(t *testing.T) {
	in := passingInput(t)
	for _, c := range checks() {
		if v := c.run(in); v != nil {
			t.Errorf("check %s fails a passing input: %+v", c.name, v)
		}
	}
	if v, err := firstFailure(in, func(stage) error { return nil }); v != nil || err != nil {
		t.Fatalf("firstFailure = %+v, %v; want nil", v, err)
	}
}

// TestChecksInOrder pins the order of the checks: who the slice is from before what it
// asks for. A reordering is a change of what the provider decides.
func TestChecksInOrder(t *testing.T) {
	want := []string{"clusterID", "sliceName", "placement", "tenantExists", "tenantAccepted", "drained",
		"cordonedNew", "cordonedKeeps", "tenantKey", "csr", "userNotConsumer", "count", "negative", "class", "limits"}
	var got []string
	var needs []stage
	for _, c := range checks() {
		got = append(got, c.name)
		needs = append(needs, c.needs)
		if c.authenticated != slices.Contains([]string{"count", "negative", "class", "limits"}, c.name) {
			t.Errorf("check %s: authenticated = %v", c.name, c.authenticated)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checks = %v, want %v", got, want)
	}
	if !slices.IsSorted(needs) {
		t.Fatalf("a check needs less than one before it: %v", needs)
	}
}

type checkCase struct {
	name   string
	mutate func(in *input)
	// check is the check expected to fail first ("" none), typ, reason and a part of its
	// message.
	check, typ, reason, msg string
	authenticated, drained  bool
}

func checkCases() []checkCase {
	auth, res := authv1beta1.ResourceSliceConditionAuthentication, authv1beta1.ResourceSliceConditionResources
	authDenied, resDenied := authv1beta1.ReasonSliceAuthenticationDenied, authv1beta1.ReasonSliceResourcesDenied
	cordoned := func(in *input) { in.state = authv1beta1.TenantConditionCordoned }
	grant := func(in *input, l corev1.ResourceList) { in.grants[in.slice.UID] = l }
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	return []checkCase{
		{name: "passes", mutate: func(*input) {}},
		{name: "cluster ID empty", mutate: func(in *input) { in.id = "" }, check: "clusterID", typ: auth, reason: authDenied, msg: "spec.consumerClusterID: the cluster ID is empty"},
		{name: "cluster ID not a label", mutate: func(in *input) { in.id = "A_B" }, check: "clusterID", typ: auth, reason: authDenied, msg: "spec.consumerClusterID:"},
		{name: "slice name invalid", mutate: func(in *input) { in.slice.Name = "Bad_Name" }, check: "sliceName", typ: auth, reason: authDenied, msg: `the ResourceSlice name "Bad_Name" is not valid`},
		{name: "misplaced", mutate: func(in *input) { in.placed, in.misplaced = false, "namespace \"x\" is not it" }, check: "placement", typ: auth, reason: authDenied,
			msg: "namespace \"x\" is not it: a ResourceSlice is decided only in the tenant namespace of its consumer"},
		{name: "misplaced without a reason", mutate: func(in *input) { in.placed = false }, check: "placement", typ: auth, reason: authDenied, msg: "decided only in the tenant namespace"},
		{name: "no Tenant", mutate: func(in *input) { in.tenant = nil }, check: "tenantExists", typ: auth, reason: authDenied,
			msg: "there is no Tenant " + testNS + "/" + testID + ": the consumer must authenticate first"},
		{name: "Tenant not accepted", mutate: func(in *input) { in.tenant.Status.AcceptedKeyFingerprint = "" }, check: "tenantAccepted", typ: auth, reason: authDenied,
			msg: "Tenant " + testNS + "/" + testID + " is not accepted by this provider"},
		{name: "Tenant's seal forged", mutate: func(in *input) { in.tenant.Status.AcceptanceSeal = []byte("forged") }, check: "tenantAccepted", typ: auth, reason: authDenied, msg: "is not accepted"},
		{name: "Tenant sealed by another provider", mutate: func(in *input) { in.providerKeys = []crypto.PublicKey{otherKey().Public()} }, check: "tenantAccepted", typ: auth, reason: authDenied, msg: "is not accepted"},
		{name: "Drained", mutate: func(in *input) { in.state = authv1beta1.TenantConditionDrained }, check: "drained", drained: true},
		{name: "Cordoned, new slice", mutate: cordoned, check: "cordonedNew", typ: auth, reason: authDenied, msg: "is Cordoned: it gets no new ResourceSlice"},
		{name: "Cordoned, granted slice asks more", mutate: func(in *input) { cordoned(in); grant(in, cpu("500m")) }, check: "cordonedKeeps", typ: res, reason: resDenied,
			msg: "is Cordoned: its slices keep what they were granted (cpu=500m)"},
		{name: "Cordoned, granted slice keeps its grant", mutate: func(in *input) { cordoned(in); grant(in, cpu("1")) }},
		// The seal covers the Tenant's key: a key that does not parse fails tenantAccepted
		// before tenantKey (TestTenantKeyCheck asks that one alone).
		{name: "Tenant key invalid", mutate: func(in *input) { in.tenant.Spec.PublicKey = []byte("not a key") }, check: "tenantAccepted", typ: auth, reason: authDenied, msg: "is not accepted"},
		{name: "CSR for another key", mutate: func(in *input) { in.slice.Spec.CSR = otherCSR(in, in.user, testID) }, check: "csr", typ: auth, reason: authDenied, msg: "spec.csr:"},
		{name: "CSR for another user", mutate: func(in *input) { in.slice.Spec.CSR = in.tenant.Spec.CSR }, check: "csr", typ: auth, reason: authDenied, msg: "spec.csr:"},
		{name: "no handshake honored: another key passes", mutate: func(in *input) {
			in.opts.HonorNoHandshake, in.tenant.Spec.AuthzPolicy = true, ptr.To(authv1beta1.TolerateNoHandshake)
			in.slice.Spec.CSR = otherCSR(in, in.user, testID)
		}},
		{name: "no handshake not honored: another key fails", mutate: func(in *input) {
			in.tenant.Spec.AuthzPolicy = ptr.To(authv1beta1.TolerateNoHandshake)
			in.slice.Spec.CSR = otherCSR(in, in.user, testID)
		}, check: "csr", typ: auth, reason: authDenied, msg: "spec.csr:"},
		{name: "user is a consumer", mutate: func(in *input) { in.userIsConsumer = true }, check: "userNotConsumer", typ: auth, reason: authDenied,
			msg: `the slice's user "` + authn.SliceUserName(testSlice, testID) + `" is the cluster ID of a consumer of this provider: name the slice otherwise`},
		{name: "user is a consumer, slice granted before", mutate: func(in *input) { in.userIsConsumer = true; grant(in, cpu("1")) }},
		{name: "one slice too many", mutate: func(in *input) { in.opts.MaxPerTenant = 1; in.siblings = append(in.siblings, older(in, "slice-0")) },
			check: "count", typ: res, reason: resDenied, authenticated: true,
			msg: "the tenant holds 2 ResourceSlices, and this provider decides at most 1 per tenant: delete others first"},
		{name: "too many, but this one is older", mutate: func(in *input) {
			in.opts.MaxPerTenant = 1
			s := older(in, "slice-2")
			s.CreationTimestamp = metav1.NewTime(in.slice.CreationTimestamp.Add(time.Hour))
			in.siblings = append(in.siblings, s)
		}},
		{name: "too many, same age, this one's name first", mutate: func(in *input) {
			in.opts.MaxPerTenant = 1
			s := older(in, "slice-2")
			s.CreationTimestamp = in.slice.CreationTimestamp
			in.siblings = append(in.siblings, s)
		}},
		{name: "too many, the older one deleting", mutate: func(in *input) {
			in.opts.MaxPerTenant = 1
			s := older(in, "slice-0")
			s.DeletionTimestamp = ptr.To(metav1.Now())
			in.siblings = append(in.siblings, s)
		}},
		{name: "too many, but granted", mutate: func(in *input) {
			in.opts.MaxPerTenant = 1
			in.siblings = append(in.siblings, older(in, "slice-0"))
			grant(in, cpu("1"))
		}},
		{name: "default count", mutate: func(in *input) {
			for i := range DefaultMaxPerTenant {
				in.siblings = append(in.siblings, older(in, "old-"+string(rune('a'+i%26))+string(rune('a'+i/26))))
			}
		}, check: "count", typ: res, reason: resDenied, authenticated: true, msg: "decides at most 64 per tenant"},
		{name: "negative quantity", mutate: func(in *input) { in.slice.Spec.Resources = cpu("-1") }, check: "negative", typ: res, reason: resDenied, authenticated: true,
			msg: "a slice asks for no negative quantity: cpu=-1"},
		{name: "default class disabled", mutate: func(in *input) { in.opts.DisableDefaultClass = true }, check: "class", typ: res, reason: authv1beta1.ReasonDefaultSliceClassDisabled,
			authenticated: true, msg: "this provider offers no default class: ask for one of gold"},
		{name: "class not offered", mutate: func(in *input) { in.slice.Spec.Class = "silver" }, check: "class", typ: res, reason: resDenied, authenticated: true,
			msg: `class "silver" is not offered by this provider (offered: default, gold)`},
		{name: "class offered", mutate: func(in *input) { in.slice.Spec.Class = "gold" }},
		{name: "over the limits", mutate: func(in *input) {
			in.limits = cpu("2")
			in.grants["other"] = cpu("1500m")
		}, check: "limits", typ: res, reason: resDenied, authenticated: true,
			msg: "the slice does not fit in the tenant's limits (liqoctl limit tenant on the provider): cpu=1 asked, 1500m of the 2 this tenant may hold already granted"},
		{name: "over the limits, asks more than its grant", mutate: func(in *input) {
			in.limits, in.slice.Spec.Resources = cpu("2500m"), cpu("2")
			grant(in, cpu("1"))
			in.grants["other"] = cpu("1")
		}, check: "limits", typ: res, reason: resDenied, authenticated: true, msg: "cpu=2 asked, 1 of the 2500m"},
		{name: "within the limits", mutate: func(in *input) { in.limits = cpu("2"); in.grants["other"] = cpu("1") }},
		{name: "over the limits, keeps its grant", mutate: func(in *input) { in.limits = cpu("1"); in.grants["other"] = cpu("1"); grant(in, cpu("1")) }},
		{name: "a limit on what it does not ask", mutate: func(in *input) { in.limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1")} }},
		// The first failing check wins.
		{name: "order: cluster ID before name", mutate: func(in *input) { in.id, in.slice.Name = "", "Bad" }, check: "clusterID", typ: auth, reason: authDenied, msg: "empty"},
		{name: "order: name before placement", mutate: func(in *input) { in.slice.Name, in.placed = "Bad", false }, check: "sliceName", typ: auth, reason: authDenied, msg: "is not valid"},
		{name: "order: placement before Tenant", mutate: func(in *input) { in.placed, in.tenant = false, nil }, check: "placement", typ: auth, reason: authDenied, msg: "decided only"},
		{name: "order: Drained before Cordoned and CSR", mutate: func(in *input) {
			in.state, in.slice.Spec.CSR = authv1beta1.TenantConditionDrained, nil
		}, check: "drained", drained: true},
		{name: "order: Cordoned before CSR", mutate: func(in *input) { cordoned(in); in.slice.Spec.CSR = nil }, check: "cordonedNew", typ: auth, reason: authDenied, msg: "Cordoned"},
		{name: "order: Cordoned grant before CSR", mutate: func(in *input) { cordoned(in); grant(in, cpu("2")); in.slice.Spec.CSR = nil },
			check: "cordonedKeeps", typ: res, reason: resDenied, msg: "Cordoned"},
		{name: "order: CSR before user", mutate: func(in *input) { in.slice.Spec.CSR, in.userIsConsumer = nil, true }, check: "csr", typ: auth, reason: authDenied, msg: "spec.csr"},
		{name: "order: user before count", mutate: func(in *input) {
			in.userIsConsumer, in.opts.MaxPerTenant = true, 1
			in.siblings = append(in.siblings, older(in, "slice-0"))
		}, check: "userNotConsumer", typ: auth, reason: authDenied, msg: "is the cluster ID"},
		{name: "order: count before negative", mutate: func(in *input) {
			in.opts.MaxPerTenant, in.slice.Spec.Resources = 1, cpu("-1")
			in.siblings = append(in.siblings, older(in, "slice-0"))
		}, check: "count", typ: res, reason: resDenied, authenticated: true, msg: "at most 1"},
		{name: "order: negative before class", mutate: func(in *input) { in.slice.Spec.Resources, in.slice.Spec.Class = cpu("-1"), "silver" },
			check: "negative", typ: res, reason: resDenied, authenticated: true, msg: "negative"},
		{name: "order: class before limits", mutate: func(in *input) { in.slice.Spec.Class, in.limits = "silver", cpu("0") },
			check: "class", typ: res, reason: resDenied, authenticated: true, msg: "silver"},
	}
}

// otherKey is a key of no cluster of the test.
func otherKey() crypto.Signer {
	k, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		panic(err)
	}
	return k
}

// otherCSR is a CSR for cn and org with a key other than the consumer's.
func otherCSR(_ *input, cn, org string) []byte { //nolint:unparam // the subject is the case: both of its fields are named
	csr, err := authn.ForgeCSRFor(otherKey(), cn, org)
	if err != nil {
		panic(err)
	}
	return csr
}

// older is a slice of the same tenant created before in's.
func older(in *input, name string) authv1beta1.ResourceSlice {
	return authv1beta1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(in.slice.CreationTimestamp.Add(-time.Hour))}}
}

func TestChecks(t *testing.T) {
	for _, tc := range checkCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := passingInput(t)
			tc.mutate(in)
			v, err := firstFailure(in, func(stage) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if tc.check == "" {
				if v != nil {
					t.Fatalf("denied by %s: %+v", v.check, v)
				}
				return
			}
			if v == nil {
				t.Fatalf("passed; want check %s to fail", tc.check)
			}
			if v.check != tc.check || v.typ != tc.typ || v.reason != tc.reason || v.drained != tc.drained || v.authenticated != tc.authenticated {
				t.Fatalf("verdict %+v; want check %s, type %q, reason %q, drained %v, authenticated %v", v, tc.check, tc.typ, tc.reason, tc.drained, tc.authenticated)
			}
			if !strings.Contains(v.msg, tc.msg) {
				t.Fatalf("message %q does not contain %q", v.msg, tc.msg)
			}
		})
	}
}

// TestNothingLoadedPastTheFirstFailure: a slice denied early causes no further read (and a
// stray one gets no finalizer).
func TestNothingLoadedPastTheFirstFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(in *input)
		upTo   stage
	}{
		{"bad name", func(in *input) { in.slice.Name = "Bad" }, stageSlice},
		{"misplaced", func(in *input) { in.placed = false }, stagePlacement},
		{"no Tenant", func(in *input) { in.tenant = nil }, stageTenant},
		{"Drained", func(in *input) { in.state = authv1beta1.TenantConditionDrained }, stageState},
		{"CSR", func(in *input) { in.slice.Spec.CSR = nil }, stageGrants},
		{"user", func(in *input) { in.userIsConsumer = true }, stageUser},
		{"class", func(in *input) { in.slice.Spec.Class = "silver" }, stageCount},
		{"passes", func(*input) {}, stageLimits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := passingInput(t)
			tc.mutate(in)
			var loaded stage
			if _, err := firstFailure(in, func(s stage) error { loaded = max(loaded, s); return nil }); err != nil {
				t.Fatal(err)
			}
			if loaded != tc.upTo {
				t.Fatalf("loaded up to stage %d, want %d", loaded, tc.upTo)
			}
		})
	}
}

// TestTenantKeyCheck asks checkTenantKey alone: behind tenantAccepted (whose seal covers
// the key) it cannot fail, but it stays a check of its own.
func TestTenantKeyCheck(t *testing.T) {
	in := passingInput(t)
	if v := checkTenantKey(in); v != nil {
		t.Fatalf("an accepted key fails: %+v", v)
	}
	in.tenant.Spec.PublicKey = []byte("not a key")
	v := checkTenantKey(in)
	if v == nil || v.typ != authv1beta1.ResourceSliceConditionAuthentication || v.reason != authv1beta1.ReasonSliceAuthenticationDenied {
		t.Fatalf("a key that does not parse: %+v", v)
	}
	in.opts.HonorNoHandshake, in.tenant.Spec.AuthzPolicy = true, ptr.To(authv1beta1.TolerateNoHandshake)
	if v := checkTenantKey(in); v != nil {
		t.Fatalf("no key is needed when TolerateNoHandshake is honored: %+v", v)
	}
}
