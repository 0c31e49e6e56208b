package handshake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
)

const attack58TN, attack58Consumer = "liqo-tenant-cl-consumer", "cl-consumer"

func attack58Quota() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, wire.NonceSecretName,
		errors.New("exceeded quota: secrets, requested: secrets=1, used: secrets=3, limited: secrets=3"))
}

func attack58Nonce(t *testing.T, age time.Duration, labelled bool) *corev1.Secret {
	t.Helper()
	v, err := authn.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{wire.RemoteClusterIDLabel: attack58Consumer}
	if labelled {
		labels[wire.NonceLabel] = "true"
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attack58TN, Name: wire.NonceSecretName, UID: "old-uid",
		Labels: labels, CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{wire.NonceField: []byte(v)}}
}

// TestAttack58FullQuotaNeverDeletes (review of 9789a06): a create refused by a full Secret
// quota never deletes the nonce there, whatever it is; a young one is handed out, kept.
func TestAttack58FullQuotaNeverDeletes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old      *corev1.Secret
		wantKept bool
	}{
		{"young", attack58Nonce(t, time.Minute, true), true},
		{"old", attack58Nonce(t, 10*time.Minute, true), false},
		{"unlabelled", attack58Nonce(t, time.Minute, false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deletes atomic.Int32
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.old).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					return attack58Quota()
				},
				Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					deletes.Add(1)
					return cl.Delete(ctx, obj, opts...)
				},
			}).Build()
			n, err := EnsureNonce(context.Background(), &Side{Client: c, Namespace: "liqo"}, attack58TN, attack58Consumer, time.Now())
			if deletes.Load() != 0 {
				t.Fatalf("the nonce was deleted under a full quota (%d deletes)", deletes.Load())
			}
			if tc.wantKept {
				if err != nil || n.Created || n.Value != string(tc.old.Data[wire.NonceField]) {
					t.Fatalf("the young nonce is not handed out: %+v, %v", n, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "replacing the old nonce") || !strings.Contains(err.Error(), "a ResourceQuota of the namespace is full") {
				t.Fatalf("want the quota's refusal, explained: %v", err)
			}
		})
	}
}

// TestAttack58ReplacementWaitIsBounded: after a delete made as the name was taken, a quota
// that never gives its room back (a create-only principal's polling takes it as soon as the
// resourcequota controller recounts) ends the wait after 8 tries, ~3.2 s. What is left is
// logged: the old nonce is gone and liqo-nonce is free (the residual race, as before 0c25d5c).
func TestAttack58ReplacementWaitIsBounded(t *testing.T) {
	old := attack58Nonce(t, 10*time.Minute, true)
	var creates atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(old).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if creates.Add(1) == 1 {
				return cl.Create(ctx, obj, opts...) // AlreadyExists, charged to the quota
			}
			return attack58Quota()
		},
	}).Build()
	start := time.Now()
	_, err := EnsureNonce(context.Background(), &Side{Client: c, Namespace: "liqo"}, attack58TN, attack58Consumer, time.Now())
	elapsed := time.Since(start)
	if elapsed > 4*time.Second {
		t.Errorf("EnsureNonce waited %s", elapsed)
	}
	if got := creates.Load(); got != 1+8 {
		t.Errorf("%d creates, want 1 + 8", got)
	}
	if err == nil || !strings.Contains(err.Error(), "creating the nonce") || !IsQuotaExceeded(err) {
		t.Errorf("want the quota's refusal: %v", err)
	}
	getErr := c.Get(context.Background(), client.ObjectKeyFromObject(old), &corev1.Secret{})
	t.Logf("after %s: %v; the nonce Secret: %v", elapsed.Round(time.Millisecond), err, getErr)
}

// TestAttack58QuotaWordingQuotedByAWebhook: IsQuotaExceeded is said to match the
// ResourceQuota plugin's wording only, but it matches anywhere in the text: a webhook's
// denial (its message is its writer's choice, prefixed by the API server) that quotes a
// quota error it relays, or words its own so, is taken for the plugin's. Explain then says
// "a ResourceQuota of the namespace is full" and createReplacement retries it. A policy
// whose own message mentions a quota is not the plugin's either.
func TestAttack58QuotaWordingQuotedByAWebhook(t *testing.T) {
	relayed := fmt.Sprintf("admission webhook %q denied the request: secrets %q is forbidden: exceeded quota: tenant-secrets, requested: secrets=1, used: secrets=3, limited: secrets=3",
		"quota.tenancy.example.com", wire.NonceSecretName)
	webhook := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: relayed}}
	vap := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, wire.NonceSecretName,
		errors.New("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: secrets \"x\" is forbidden: exceeded quota: of the team"))
	// A policy's own wording that mentions a quota (TestAttack57's first case, review of 0c25d5c).
	ownWording := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, wire.NonceSecretName,
		errors.New("ValidatingAdmissionPolicy 'team-limits' with binding 'team-limits' denied request: team exceeded quota of peerings per week"))
	for name, err := range map[string]error{"webhook": webhook, "policy": vap, "policy, its own wording": ownWording} {
		if IsQuotaExceeded(err) {
			t.Errorf("%s: a refusal that is not the ResourceQuota plugin's is taken for it: %v", name, (&Side{}).Explain(err, "creating the nonce"))
		}
	}
	if !IsQuotaExceeded(fmt.Errorf("wrapped: %w", attack58Quota())) {
		t.Error("the plugin's own refusal, wrapped, is not recognized")
	}
}

// TestEnsureNonceOwnCreateLost: a create stored though its answer was lost (a timeout) is
// found as this run's own nonce, not replaced as an unknown one (helper-17).
func TestEnsureNonceOwnCreateLost(t *testing.T) {
	var deletes atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := cl.Create(ctx, obj, opts...); err != nil {
				return err
			}
			return apierrors.NewTimeoutError("the answer was lost", 1)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes.Add(1)
			return cl.Delete(ctx, obj, opts...)
		},
	}).Build()
	n, err := EnsureNonce(context.Background(), &Side{Client: c, Namespace: "liqo"}, attack58TN, attack58Consumer, time.Now())
	if err != nil || !n.Created || deletes.Load() != 0 {
		t.Fatalf("want this run's nonce, created, nothing deleted: %+v, %v, %d deletes", n, err, deletes.Load())
	}
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: attack58TN, Name: wire.NonceSecretName}, &s); err != nil || string(s.Data[wire.NonceField]) != n.Value {
		t.Fatalf("the stored nonce is not the one handed out: %v", err)
	}
}

// TestEnsureNonceDeletedMeanwhileUnderQuota: the first create is refused as the name is
// taken (and charged to the quota), and the Secret is deleted by someone else before the
// read: the create that follows waits for the quota's recount as after its own delete.
func TestEnsureNonceDeletedMeanwhileUnderQuota(t *testing.T) {
	old := attack58Nonce(t, time.Minute, true)
	var creates atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(old).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch creates.Add(1) {
			case 1:
				err := cl.Create(ctx, obj, opts...) // AlreadyExists, charged to the quota
				if delErr := cl.Delete(ctx, old.DeepCopy()); delErr != nil {
					return delErr
				}
				return err
			case 2:
				return attack58Quota() // not recounted yet
			}
			return cl.Create(ctx, obj, opts...)
		},
	}).Build()
	n, err := EnsureNonce(context.Background(), &Side{Client: c, Namespace: "liqo"}, attack58TN, attack58Consumer, time.Now())
	if err != nil || !n.Created || creates.Load() != 3 {
		t.Fatalf("want a new nonce on the third create: %+v, %v, %d creates", n, err, creates.Load())
	}
}
