package tenant

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// TestAttack36ReplayedOldSealRebindsRotatedAwayKey: the consumer moved (done) from key
// f.fp to another key. A Tenant spec+status writer (not cluster-admin) saved the Tenant as
// it was before the move (its old spec, and its old status with the seal this provider
// made for the old key over the same Tenant UID) and writes both back. The old key must
// never be accepted again in this Tenant: no binding may name User <C> (the thief of the
// old key's certificate would be authorized again).
func TestAttack36ReplayedOldSealRebindsRotatedAwayKey(t *testing.T) {
	f := newFixture(t)
	replayed := f.accepted() // old spec, old status: exactly what the writer saved
	w := f.newWorld(func(r *cluster.TenantRecord) {
		r.KeyRotation = &cluster.KeyRotation{TenantUID: string(f.tenant.UID), From: f.fp, To: "SHA256:newkeyfingerprint", CSRDigest: "d",
			FromSubjectKind: rbacv1.UserKind, FromSubjectName: f.id, At: f.now, Done: true, Revoked: &f.now}
	}, replayed)
	_, got, _, _ := w.reconcile()
	if c := condition(t, got, authv1beta1.ConditionAuthenticated); c.Status == metav1.ConditionTrue {
		t.Errorf("the rotated-away key %s is accepted again from a replayed seal: Authenticated %s %s", f.fp, c.Reason, c.Message)
	}
	for _, name := range []string{wire.ControlPlaneBindingName, wire.TenantReaderName} {
		var rb rbacv1.RoleBinding
		if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &rb); err == nil {
			for _, s := range rb.Subjects {
				if s.Kind == rbacv1.UserKind && s.Name == f.id {
					t.Errorf("binding %s names User %s again after the consumer rotated away from its key", name, f.id)
				}
			}
		}
	}
}
