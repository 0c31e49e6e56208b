package identity

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ready returns the Ready condition of id, failing when it is not there.
func ready(t *testing.T, id *authv1beta1.Identity) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(id.Status.Conditions, authv1beta1.ConditionReady)
	if c == nil {
		t.Fatalf("no condition Ready in %+v", id.Status.Conditions)
	}
	return c
}

// hasEvent says whether an Event of type and reason was recorded.
func hasEvent(evs []string, evType, reason string) bool {
	return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, evType+" "+reason+" ") })
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keyOf(id *authv1beta1.Identity) types.NamespacedName {
	return types.NamespacedName{Namespace: id.Namespace, Name: id.Name}
}

// TestRefusedIdentities: an Identity that is misplaced, misnamed, mislabelled, of a type
// this project does not handle, or whose certificate is not one of this cluster's key and
// user chaining to the given and pinned CA, is refused with the reason of the check that
// fails, a Warning Event and no kubeconfig Secret; the same refusal decided again writes
// nothing.
func TestRefusedIdentities(t *testing.T) {
	for _, tc := range []struct {
		name string
		// pinned says whether the record pins the fixture's CA (else nothing is pinned).
		pinned bool
		mutate func(f *fixture, id *authv1beta1.Identity) []client.Object
		reason string
	}{
		{name: "in a namespace labelled for the provider but not recorded", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Namespace = "elsewhere"
			return []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", UID: "ns-uid-2", Labels: cluster.TenantNamespaceLabels(testProvider)}}}
		}, reason: authv1beta1.ReasonIdentityMisplaced},
		{name: "in the tenant namespace of another provider", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name, id.Spec.ClusterID, id.Labels[wire.RemoteClusterIDLabel] = wire.IdentityName("cl-other"), "cl-other", "cl-other"
			return nil
		}, reason: authv1beta1.ReasonIdentityMisplaced},
		{name: "a control-plane Identity named for another provider", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name = wire.IdentityName("cl-other")
			return nil
		}, reason: authv1beta1.ReasonIdentityNameMismatch},
		{name: "a ResourceSlice Identity without its slice label", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name, id.Spec.Type = wire.SliceIdentityName("s1"), authv1beta1.ResourceSliceIdentityType
			return nil
		}, reason: authv1beta1.ReasonIdentityNameMismatch},
		{name: "a ResourceSlice Identity named for no slice, without its slice label", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name, id.Spec.Type = wire.SliceIdentityName(""), authv1beta1.ResourceSliceIdentityType
			return nil
		}, reason: authv1beta1.ReasonIdentityNameMismatch},
		{name: "a ResourceSlice Identity named for another slice", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name, id.Spec.Type, id.Labels[wire.SliceNameLabel] = wire.SliceIdentityName("s2"), authv1beta1.ResourceSliceIdentityType, "s1"
			return nil
		}, reason: authv1beta1.ReasonIdentityNameMismatch},
		{name: "labelled for another provider", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Labels[wire.RemoteClusterIDLabel] = "cl-other"
			return nil
		}, reason: authv1beta1.ReasonIdentityLabelMismatch},
		{name: "not labelled", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Labels = nil
			return nil
		}, reason: authv1beta1.ReasonIdentityLabelMismatch},
		{name: "an invalid cluster ID", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.ClusterID = "Not_A_Cluster_ID"
			return nil
		}, reason: authv1beta1.ReasonInvalidClusterID},
		{name: "an unsupported type", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.Type = "AWS"
			return nil
		}, reason: authv1beta1.ReasonIdentityTypeUnsupported},
		{name: "no remote namespace", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.Namespace = nil
			return nil
		}, reason: authv1beta1.ReasonRemoteNamespaceMissing},
		{name: "a certificate for another key", mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			other := must(authn.GenerateKey(authn.Ed25519))
			id.Spec.AuthParams.SignedCRT = f.ca.leaf(other.Public(), testSelf, 2, f.now.Add(time.Hour))
			return nil
		}, reason: string(authn.ReasonCertificateKeyMismatch)},
		{name: "a certificate for another user", mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.SignedCRT = f.ca.leaf(f.key.Public(), "cl-other", 2, f.now.Add(time.Hour))
			return nil
		}, reason: string(authn.ReasonCertificateSubject)},
		{name: "a ResourceSlice Identity with the control-plane user's certificate", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Name, id.Spec.Type, id.Labels[wire.SliceNameLabel] = wire.SliceIdentityName("s1"), authv1beta1.ResourceSliceIdentityType, "s1"
			return nil
		}, reason: string(authn.ReasonCertificateSubject)},
		{name: "a certificate not chaining to the given CA", mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.SignedCRT = newCA(f.now).leaf(f.key.Public(), testSelf, 2, f.now.Add(time.Hour))
			return nil
		}, reason: string(authn.ReasonCertificateNotTrusted)},
		{name: "an expired certificate", mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.SignedCRT = f.ca.leaf(f.key.Public(), testSelf, 2, f.now.Add(-time.Minute))
			return nil
		}, reason: string(authn.ReasonCertificateExpired)},
		{name: "another CA than the pinned one", pinned: true, mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			other := newCA(f.now)
			id.Spec.AuthParams.CA, id.Spec.AuthParams.SignedCRT = other.pem, other.leaf(f.key.Public(), testSelf, 2, f.now.Add(time.Hour))
			return nil
		}, reason: string(authn.ReasonCAFingerprintMismatch)},
		{name: "the pinned CA and another in its bundle", pinned: true, mutate: func(f *fixture, id *authv1beta1.Identity) []client.Object {
			other := newCA(f.now)
			id.Spec.AuthParams.CA = append(slices.Clone(f.ca.pem), other.pem...)
			id.Spec.AuthParams.SignedCRT = other.leaf(f.key.Public(), testSelf, 2, f.now.Add(time.Hour))
			return nil
		}, reason: string(authn.ReasonCAFingerprintMismatch)},
		{name: "another proxy than the pinned one", pinned: true, mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.ProxyURL = ptr.To("http://proxy.attacker.example:3128")
			return nil
		}, reason: string(authn.ReasonProxyNotPinned)},
		{name: "a proxy with none pinned (a peering older than the pin, an unpin)", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.ProxyURL = ptr.To("http://proxy.attacker.example:3128")
			return nil
		}, reason: string(authn.ReasonProxyNotPinned)},
		{name: "no CA", mutate: func(_ *fixture, id *authv1beta1.Identity) []client.Object {
			id.Spec.AuthParams.CA = nil
			return nil
		}, reason: string(authn.ReasonCAInvalid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.identity()
			objs := append(tc.mutate(f, id), id)
			pin := ""
			if tc.pinned {
				pin = must(authn.CAFingerprint(f.ca.pem))
			}
			w := f.newWorld(pin, objs...)
			res, got, writes, evs := w.reconcile(keyOf(id))
			c := ready(t, got)
			if c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Fatalf("Ready is %s %s (%s), want False %s", c.Status, c.Reason, c.Message, tc.reason)
			}
			if tc.reason == string(authn.ReasonCAFingerprintMismatch) {
				// The advice pins the presented CA in place of the old, once the provider's
				// administrator confirmed it: an unpin would let the next Identity choose.
				repin := cluster.RepinCACommand(testLiqoNS, testProvider, must(authn.CAFingerprint(id.Spec.AuthParams.CA)))
				if !strings.Contains(c.Message, repin) || strings.Contains(c.Message, `"op":"remove"`) {
					t.Errorf("the refusal advises %q, want %q", c.Message, repin)
				}
			}
			if !hasEvent(evs, corev1.EventTypeWarning, tc.reason) {
				t.Errorf("no Warning Event %s in %v", tc.reason, evs)
			}
			if got.Status.LastRefusal == nil || got.Status.LastRefusal.Reason != tc.reason || !got.Status.LastRefusal.Time.Equal(&metav1.Time{Time: f.now}) {
				t.Errorf("last refusal %+v, want %s at %v", got.Status.LastRefusal, tc.reason, f.now)
			}
			if got.Status.KubeconfigSecretRef != nil || got.Status.Certificate != nil || res.RequeueAfter != 0 {
				t.Errorf("a refused Identity names Secret %v, certificate %v, requeue %v", got.Status.KubeconfigSecretRef, got.Status.Certificate, res.RequeueAfter)
			}
			if s := w.secret(id.Namespace, id.Name); s != nil {
				t.Errorf("a refused Identity got a kubeconfig Secret: %v", s.Name)
			}
			// A refused Identity pins no CA, whichever check refused it: an Identity
			// writer's decoy would otherwise choose the CA the provider must present.
			if rec := w.record(); rec.CAFingerprint != pin {
				t.Errorf("the record pins %q after the refusal, want %q", rec.CAFingerprint, pin)
			}
			if want := map[string]int{"update Identity/status": 1}; !equalCounts(withoutRecord(writes), want) {
				t.Errorf("writes %v, want %v", writes, want)
			}
			if _, _, writes, evs := w.reconcile(keyOf(id)); len(writes) != 0 || len(evs) != 0 {
				t.Errorf("the same refusal decided again wrote %v, recorded %v", writes, evs)
			}
		})
	}
}

// withoutRecord is writes without those of the tenant record (a ConfigMap), which pinning
// the CA on first use makes.
func withoutRecord(writes map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range writes {
		if !strings.HasSuffix(k, " ConfigMap") {
			out[k] = v
		}
	}
	return out
}

// TestWritesKubeconfig: a certificate of this cluster's key and user, chaining to the
// pinned CA (or to the CA pinned now, on first use), becomes a kubeconfig Secret owned by
// the Identity, and Ready is true; reconciled again, nothing is written.
func TestWritesKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pinned bool
	}{{"pinned CA", true}, {"CA pinned on first use", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.identity()
			fp := must(authn.CAFingerprint(f.ca.pem))
			pin := ""
			if tc.pinned {
				pin = fp
			}
			w := f.newWorld(pin, id)
			res, got, writes, evs := w.reconcile(keyOf(id))
			if c := ready(t, got); c.Status != metav1.ConditionTrue || c.Reason != authv1beta1.ReasonKubeconfigReady {
				t.Fatalf("Ready is %s %s (%s), want True %s", c.Status, c.Reason, c.Message, authv1beta1.ReasonKubeconfigReady)
			}
			if !hasEvent(evs, corev1.EventTypeNormal, authv1beta1.ReasonKubeconfigReady) || len(evs) != 1 {
				t.Errorf("Events %v, want one Normal %s", evs, authv1beta1.ReasonKubeconfigReady)
			}
			// The CA is pinned on first use; the proxy only ever by a handshake.
			if rec := w.record(); rec.CAFingerprint != fp || (rec.ProxyURL != nil) != tc.pinned {
				t.Errorf("the record pins CA %q and proxy %v, want %q and a proxy pinned %v", rec.CAFingerprint, rec.ProxyURL, fp, tc.pinned)
			}
			wantKubeconfig(t, w, got, testSelf)
			if got.Status.CAFingerprint != fp || got.Status.Certificate == nil || got.Status.Certificate.SerialNumber != "abc" ||
				got.Status.LastRefusal != nil || got.Status.ObservedGeneration != 1 {
				t.Errorf("status %+v", got.Status)
			}
			if want := 23*time.Hour + time.Second; res.RequeueAfter != want {
				t.Errorf("requeue after %v, want %v (the certificate's expiry)", res.RequeueAfter, want)
			}
			if want := map[string]int{"create Secret": 1, "update Identity/status": 1}; !equalCounts(withoutRecord(writes), want) {
				t.Errorf("writes %v, want %v", writes, want)
			}
			if _, _, writes, evs := w.reconcile(keyOf(id)); len(writes) != 0 || len(evs) != 0 {
				t.Errorf("reconciled again, it wrote %v, recorded %v", writes, evs)
			}
		})
	}
}

// wantKubeconfig checks the kubeconfig Secret of got: owned by it, labelled, holding a
// kubeconfig of the Identity's server, CA and certificate with this cluster's key, for user.
func wantKubeconfig(t *testing.T, w *world, got *authv1beta1.Identity, user string) {
	t.Helper()
	s := w.secret(got.Namespace, got.Name)
	if s == nil {
		t.Fatal("no kubeconfig Secret")
	}
	if got.Status.KubeconfigSecretRef == nil || got.Status.KubeconfigSecretRef.Name != s.Name {
		t.Errorf("status names Secret %v, want %s", got.Status.KubeconfigSecretRef, s.Name)
	}
	if o := metav1.GetControllerOf(s); o == nil || o.UID != got.UID || o.Kind != "Identity" {
		t.Errorf("the Secret is controlled by %+v, want the Identity", o)
	}
	if s.Labels[wire.RemoteClusterIDLabel] != testProvider || s.Labels[wire.IdentityTypeLabel] != string(got.Spec.Type) ||
		s.Labels[wire.ManagedByLabel] != wire.ManagedByValue || s.Annotations[wire.RemoteTenantNamespaceAnnotation] != testRemoteNS {
		t.Errorf("Secret labels %v, annotations %v", s.Labels, s.Annotations)
	}
	info, err := authn.ReadKubeconfig(s.Data[wire.KubeconfigField])
	if err != nil {
		t.Fatalf("the Secret's kubeconfig: %v", err)
	}
	if info.Server != testAPIServer || info.Namespace != testRemoteNS || !bytes.Equal(info.CA, got.Spec.AuthParams.CA) ||
		!bytes.Equal(info.CertPEM, got.Spec.AuthParams.SignedCRT) {
		t.Errorf("kubeconfig for %s in %s, CA %t, certificate %t", info.Server, info.Namespace, bytes.Equal(info.CA, got.Spec.AuthParams.CA),
			bytes.Equal(info.CertPEM, got.Spec.AuthParams.SignedCRT))
	}
	key, err := authn.ParsePrivateKey(info.KeyPEM)
	if err != nil || !authn.PublicKeysEqual(key.Public(), w.key.Public()) {
		t.Errorf("the kubeconfig's key is not this cluster's (%v)", err)
	}
	if !strings.Contains(ready(t, got).Message, `user "`+user+`"`) {
		t.Errorf("Ready says %q, want user %q", ready(t, got).Message, user)
	}
}

// TestWritesSliceKubeconfig: a ResourceSlice Identity's certificate is for the slice's
// user, not the control plane's.
func TestWritesSliceKubeconfig(t *testing.T) {
	f := newFixture(t)
	id := f.identity()
	user := authn.SliceUserName("s1", testSelf)
	id.Name, id.Spec.Type, id.Labels[wire.SliceNameLabel] = wire.SliceIdentityName("s1"), authv1beta1.ResourceSliceIdentityType, "s1"
	id.Spec.AuthParams.SignedCRT = f.ca.leaf(f.key.Public(), user, 3, f.now.Add(time.Hour))
	w := f.newWorld("", id)
	_, got, _, _ := w.reconcile(keyOf(id))
	if c := ready(t, got); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready is %s %s (%s), want True", c.Status, c.Reason, c.Message)
	}
	wantKubeconfig(t, w, got, user)
}

// TestKubeconfigSecretOwnership: a Secret of the kubeconfig's name that something else
// controls is left alone and the Identity refused; one left by an earlier Identity of the
// same name is adopted; one the Identity owns but someone changed is written back.
func TestKubeconfigSecretOwnership(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		data   string
		// refused says the Identity is refused and the Secret left as it was.
		refused bool
	}{
		{name: "not owned", data: "someone's", refused: true},
		{name: "controlled by another kind", owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: wire.IdentityName(testProvider),
			UID: "cm-uid", Controller: ptr.To(true)}}, data: "someone's", refused: true},
		{name: "controlled by an Identity of another name", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity",
			Name: "controlplane-cl-other", UID: "identity-uid-0", Controller: ptr.To(true)}}, data: "someone's", refused: true},
		{name: "owned but not controlled by the Identity", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity",
			Name: wire.IdentityName(testProvider), UID: "identity-uid-1"}}, data: "someone's", refused: true},
		{name: "controlled by another kind of this group, of the Identity's name", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(),
			Kind: "Tenant", Name: wire.IdentityName(testProvider), UID: "tenant-uid", Controller: ptr.To(true)}}, data: "someone's", refused: true},
		{name: "left by an earlier Identity of that name", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity",
			Name: wire.IdentityName(testProvider), UID: "identity-uid-0", Controller: ptr.To(true)}}, data: "old"},
		{name: "left by an earlier Identity of that name, also owned by another Identity", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(),
			Kind: "Identity", Name: wire.IdentityName(testProvider), UID: "identity-uid-0", Controller: ptr.To(true)},
			{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity", Name: "controlplane-cl-other", UID: "identity-uid-2"}}, data: "old"},
		{name: "controlled by the Identity, changed by someone", owners: []metav1.OwnerReference{{APIVersion: authv1beta1.GroupVersion.String(), Kind: "Identity",
			Name: wire.IdentityName(testProvider), UID: "identity-uid-1", Controller: ptr.To(true)}}, data: "tampered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.identity()
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: wire.KubeconfigSecretName(id.Name), OwnerReferences: tc.owners},
				Data: map[string][]byte{wire.KubeconfigField: []byte(tc.data)}}
			w := f.newWorld(must(authn.CAFingerprint(f.ca.pem)), id, s)
			_, got, writes, evs := w.reconcile(keyOf(id))
			if !tc.refused {
				if c := ready(t, got); c.Status != metav1.ConditionTrue {
					t.Fatalf("Ready is %s %s (%s), want True", c.Status, c.Reason, c.Message)
				}
				wantKubeconfig(t, w, got, testSelf)
				if n := len(w.secret(id.Namespace, id.Name).OwnerReferences); n != 1 {
					t.Errorf("the Secret has %d owners, want the Identity alone", n)
				}
				return
			}
			reason := authv1beta1.ReasonKubeconfigSecretNotOwned
			if c := ready(t, got); c.Status != metav1.ConditionFalse || c.Reason != reason {
				t.Fatalf("Ready is %s %s (%s), want False %s", c.Status, c.Reason, c.Message, reason)
			}
			if !hasEvent(evs, corev1.EventTypeWarning, reason) {
				t.Errorf("no Warning Event %s in %v", reason, evs)
			}
			if after := w.secret(id.Namespace, id.Name); string(after.Data[wire.KubeconfigField]) != tc.data || len(after.OwnerReferences) != len(tc.owners) {
				t.Errorf("the Secret not owned was changed: %v, owners %v", after.Data, after.OwnerReferences)
			}
			if want := map[string]int{"update Identity/status": 1}; !equalCounts(writes, want) {
				t.Errorf("writes %v, want %v", writes, want)
			}
		})
	}
}

// TestRenewal: a new certificate (another serial) rewrites the kubeconfig and records the
// renewal.
func TestRenewal(t *testing.T) {
	f := newFixture(t)
	id := f.identity()
	w := f.newWorld(must(authn.CAFingerprint(f.ca.pem)), id)
	_, got, _, _ := w.reconcile(keyOf(id))
	if got.Status.LastRenewal != nil {
		t.Fatalf("a first certificate is a renewal at %v", got.Status.LastRenewal)
	}
	got.Spec.AuthParams.SignedCRT = f.ca.leaf(f.key.Public(), testSelf, 0xdef, f.now.Add(47*time.Hour))
	got.Generation = 2
	if err := w.c.Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Minute)
	_, got, writes, _ := w.reconcile(keyOf(id))
	wantKubeconfig(t, w, got, testSelf)
	if got.Status.Certificate.SerialNumber != "def" || got.Status.LastRenewal == nil || !got.Status.LastRenewal.Time.Equal(f.now) {
		t.Errorf("certificate %+v, last renewal %v, want def renewed at %v", got.Status.Certificate, got.Status.LastRenewal, f.now)
	}
	if want := map[string]int{"patch Secret": 1, "update Identity/status": 1}; !equalCounts(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
}
