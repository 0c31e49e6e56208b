package tenant

import (
	"context"
	"slices"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// handshakeDone is a world where the consumer's Tenant was accepted, its certificate
// issued and its access granted. Beside it are a request the manager made for the Tenant
// that no saved status took back (as a reconcile left it whose Tenant went under it), and
// one somebody else made for the same Tenant.
func handshakeDone(t *testing.T) *world {
	t.Helper()
	f := newFixture(t)
	w := f.newWorld(nil, f.tenant.DeepCopy(), f.nonceSecret())
	w.signs = true
	if _, got, _, _ := w.reconcile(); !slices.Contains(got.Finalizers, wire.TenantFinalizer) || !got.Status.AuthParams.HasCertificate() {
		t.Fatalf("the handshake did not complete: finalizers %v, status %+v", got.Finalizers, got.Status)
	}
	request := func(name string, uid types.UID) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			// UIDs set, as an API server sets them (a fake client does not).
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{wire.ManagedByLabel: wire.ManagedByValue, wire.TenantUIDLabel: string(uid)},
				Annotations: map[string]string{wire.TenantAnnotation: f.ns + "/" + f.id}},
			Spec:   certificatesv1.CertificateSigningRequestSpec{Request: []byte("x"), SignerName: certificatesv1.KubeAPIServerClientSignerName},
			Status: certificatesv1.CertificateSigningRequestStatus{Certificate: f.certPEM},
		}
	}
	if err := w.c.Create(context.Background(), request("left-behind", f.tenant.UID)); err != nil {
		t.Fatal(err)
	}
	foreign := request("foreign", "someone-elses")
	if err := w.c.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	// Create records the manager as requester in this world: put mallory back.
	foreign.Spec.Username, foreign.Spec.UID = "mallory", "mallory-uid"
	if err := w.c.Update(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	return w
}

// requests are the names of the CertificateSigningRequests in w, by the Tenant UID they
// are labelled for.
func (w *world) requests() map[string][]string {
	w.t.Helper()
	var list certificatesv1.CertificateSigningRequestList
	if err := w.c.List(context.Background(), &list); err != nil {
		w.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range list.Items {
		out[c.Labels[wire.TenantUIDLabel]] = append(out[c.Labels[wire.TenantUIDLabel]], c.Name)
	}
	return out
}

// controlled are the Roles and RoleBindings of the tenant namespace that uid controls.
func (w *world) controlled(uid types.UID) []string {
	w.t.Helper()
	var out []string
	var roles rbacv1.RoleList
	var bindings rbacv1.RoleBindingList
	if err := w.c.List(context.Background(), &roles, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.List(context.Background(), &bindings, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	for _, r := range roles.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == uid {
			out = append(out, "Role "+r.Name)
		}
	}
	for _, b := range bindings.Items {
		if ref := metav1.GetControllerOf(&b); ref != nil && ref.UID == uid {
			out = append(out, "RoleBinding "+b.Name)
		}
	}
	return out
}

// stripAndDelete is what a peering user may do to its Tenant: set its finalizers to keep
// (the manager's taken off), then delete it.
func (w *world) stripAndDelete(keep ...string) {
	w.t.Helper()
	ctx := context.Background()
	got := &authv1beta1.Tenant{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: w.id}, got); err != nil {
		w.t.Fatal(err)
	}
	got.Finalizers = keep
	if err := w.c.Update(ctx, got); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.Delete(ctx, got); err != nil {
		w.t.Fatal(err)
	}
}

// TestLeftoversOfAGoneTenant: a Tenant whose finalizer was taken off before it was deleted
// goes at once; the reconcile its request's events bring finds it gone and deletes the
// request the manager made for it, and only that.
func TestLeftoversOfAGoneTenant(t *testing.T) {
	w := handshakeDone(t)
	w.stripAndDelete()
	w.writes.Take()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: w.id}}); err != nil {
		t.Fatal(err)
	}
	if got := w.requests(); len(got[string(w.tenant.UID)]) != 0 || len(got["someone-elses"]) != 1 {
		t.Errorf("requests left: %v; want none of the gone Tenant's, and the one somebody else made", got)
	}
	if writes := w.writes.Take(); writes["delete CertificateSigningRequest"] != 1 || len(writes) != 1 {
		t.Errorf("writes %v, want one deletion", writes)
	}
	// Nothing is left to do: the next reconcile writes nothing.
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: w.id}}); err != nil {
		t.Fatal(err)
	}
	if writes := w.writes.Take(); len(writes) != 0 {
		t.Errorf("writes %v after the leftovers went", writes)
	}
}

// TestLeftoversOfARecreatedTenant: the Tenant deleted without its finalizer and made again
// under its name: the new one's reconcile deletes the request made for the old one.
func TestLeftoversOfARecreatedTenant(t *testing.T) {
	w := handshakeDone(t)
	w.stripAndDelete()
	again := w.tenant.DeepCopy()
	again.UID, again.ResourceVersion = "tenant-uid-2", ""
	if err := w.c.Create(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: w.id}}); err != nil {
		t.Fatal(err)
	}
	if got := w.requests(); len(got[string(w.tenant.UID)]) != 0 || len(got["someone-elses"]) != 1 {
		t.Errorf("requests left: %v; want none of the old Tenant's, and the one somebody else made", got)
	}
}

// TestHeldTenantLosesItsAccess: a peering user swaps the manager's finalizer for one of its
// own and deletes its Tenant, which its finalizer holds: the Tenant, in deletion, keeps no
// access and no request, and its finalizer stays (it is not the manager's to remove).
func TestHeldTenantLosesItsAccess(t *testing.T) {
	w := handshakeDone(t)
	if len(w.controlled(w.tenant.UID)) == 0 {
		t.Fatal("the Tenant controls no Role or binding")
	}
	const hold = "attacker.example/hold"
	w.stripAndDelete(hold)
	_, got, _, _ := w.reconcile()
	if got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, []string{hold}) {
		t.Fatalf("deletion %v, finalizers %v", got.DeletionTimestamp, got.Finalizers)
	}
	if left := w.controlled(w.tenant.UID); len(left) != 0 {
		t.Errorf("the Tenant in deletion keeps %v", left)
	}
	if reqs := w.requests(); len(reqs[string(w.tenant.UID)]) != 0 {
		t.Errorf("the Tenant in deletion keeps its requests %v", reqs[string(w.tenant.UID)])
	}
}

// TestFinalizerPatchOnTheTenantDecidedOn: the finalizer's patch carries the resourceVersion
// the reconcile decided on: a Tenant changed since (made again under its name, or its
// finalizers changed) refuses it, and no request is made.
func TestFinalizerPatchOnTheTenantDecidedOn(t *testing.T) {
	f := newFixture(t)
	w := f.newWorld(nil, f.tenant.DeepCopy(), f.nonceSecret())
	changed := false
	w.refuse = func(verb string, obj client.Object) error {
		if _, ok := obj.(*authv1beta1.Tenant); ok && verb == "patch" && !changed {
			// Another writer changes the Tenant between the reconcile's read and its patch.
			changed = true
			cur := &authv1beta1.Tenant{}
			if err := w.c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			cur.Labels["changed"] = "yes"
			return w.c.Update(context.Background(), cur)
		}
		return nil
	}
	w.writes.Take()
	_, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: f.id}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("reconcile: %v, want a conflict", err)
	}
	if writes := w.writes.Take(); writes["create CertificateSigningRequest"] != 0 {
		t.Errorf("a request was made for a Tenant changed under the patch: %v", writes)
	}
}
