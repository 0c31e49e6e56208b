package authmanager

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/shared/wiring"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
)

// RotationRecheck is how long the rotation controller waits, without a change on this
// cluster, before asking the providers again: their answers are on other clusters.
const RotationRecheck = 10 * time.Second

// rotationReconciler runs the key rotation (pkg/rotation) when the authentication-keys
// Secret asks for one: annotation rotate-key not equal to key-rotated. Who writes what it
// reads: the Secret, this cluster's administrator (and liqoctl rotate key as them); the
// rest, pkg/rotation's package comment.
type rotationReconciler struct {
	// cached reads the Secret first, from the cache: each Identity and Tenant event wakes
	// the controller, which must ask nothing of the API server when no rotation is asked.
	cached client.Reader
	// client reads live (liveReads) once a rotation is asked.
	client    client.Client
	namespace string
	// role is the sides the manager runs: the Identities (consumer) and the Tenants
	// (provider) move the rotation on.
	role   Role
	driver *rotation.Driver
}

// SetupWithManager registers it for the keys Secret and, to move on at each change, the
// Identities.
func (r *rotationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	keys := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.namespace, Name: wire.KeysSecretName}}
	toKeys := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{keys} })
	isKeys := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.namespace && o.GetName() == wire.KeysSecretName
	})
	b := wiring.NewController(mgr, "rotation", r.role).For(&corev1.Secret{}, isKeys)
	if r.role.Has(Consumer) {
		b = b.Watches(&authv1beta1.Identity{}, toKeys)
	}
	if r.role.Has(Provider) {
		b = b.Watches(&authv1beta1.Tenant{}, toKeys)
	}
	return b.Complete(r)
}

// Reconcile stages, steps or ends the rotation the Secret asks for.
func (r *rotationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: r.namespace, Name: wire.KeysSecretName}
	var s corev1.Secret
	if err := r.cached.Get(ctx, key, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rotationAsked(&s) {
		// The cache may be behind an annotation just written: that write's own event
		// comes next.
		return ctrl.Result{}, nil
	}
	// Asked, as the cache saw it: the request may already be answered, which only a live
	// read tells (else a new key would be staged).
	if err := r.client.Get(ctx, key, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rotationAsked(&s) {
		return ctrl.Result{}, nil
	}
	token := s.Annotations[wire.RotateKeyAnnotation]
	ks, err := cluster.KeySetFromSecret(&s) // the live copy just read
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ks.Rotating() {
		// A new request: stage with the algorithm of the current key.
		r.driver.Algorithm = algorithmOf(ks)
		if _, stageErr := r.driver.Stage(ctx); stageErr != nil {
			return ctrl.Result{}, stageErr
		}
	}
	st, err := r.driver.Step(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.Phase != rotation.Retired && st.Phase != rotation.Idle {
		ctrl.LoggerFrom(ctx).Info("key rotation", "phase", st.Phase, "waiting", st.Waiting())
		return ctrl.Result{RequeueAfter: RotationRecheck}, nil
	}
	// Retired: answer the request. A conflict is retried here, not left to the Secret's
	// next event: that event would see no rotation under way and the request unanswered,
	// and stage a new key.
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if getErr := r.client.Get(ctx, key, &s); getErr != nil {
			return getErr
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[wire.KeyRotatedAnnotation] = token
		return r.client.Update(ctx, &s)
	})
	return ctrl.Result{}, err
}

// rotationAsked says whether the keys Secret s asks for a rotation it has not had:
// annotation rotate-key set and not equal to key-rotated.
func rotationAsked(s *corev1.Secret) bool {
	token := s.Annotations[wire.RotateKeyAnnotation]
	return token != "" && token != s.Annotations[wire.KeyRotatedAnnotation]
}

// algorithmOf is the algorithm of the current key (the new key keeps it).
func algorithmOf(ks cluster.KeySet) authn.Algorithm {
	if _, ok := ks.Current.Public().(interface{ Size() int }); ok {
		return authn.RSA2048
	}
	return authn.Ed25519
}

// liveReads is a client whose reads go to the API server (reader), not to the cache.
type liveReads struct {
	client.Client
	reader client.Reader
}

// Get reads obj live.
func (l liveReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.reader.Get(ctx, key, obj, opts...)
}

// List reads list live.
func (l liveReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.reader.List(ctx, list, opts...)
}
