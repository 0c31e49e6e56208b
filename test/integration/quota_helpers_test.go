package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretQuota is a Secret ResourceQuota in a namespace of a test site. These control
// planes run no resourcequota controller: the test sets its status as that controller
// would (setUsed, recount).
type secretQuota struct {
	t    testing.TB
	s    *site
	q    *corev1.ResourceQuota
	hard corev1.ResourceList
}

// newSecretQuota makes, as the administrator (or a policy engine giving each namespace a
// quota), a Secret quota in namespace ns with room for room more Secrets than are there.
func newSecretQuota(t testing.TB, s *site, ns string, room int64) *secretQuota {
	t.Helper()
	sq := &secretQuota{t: t, s: s}
	inUse := sq.count(ns)
	sq.hard = corev1.ResourceList{corev1.ResourceSecrets: *resource.NewQuantity(inUse+room, resource.DecimalSI)}
	sq.q = &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secrets"}, Spec: corev1.ResourceQuotaSpec{Hard: sq.hard}}
	require.NoError(t, s.client.Create(context.Background(), sq.q))
	sq.setUsed(inUse)
	return sq
}

// count is how many Secrets namespace ns holds.
func (sq *secretQuota) count(ns string) int64 {
	var all corev1.SecretList
	require.NoError(sq.t, sq.s.client.List(context.Background(), &all, client.InNamespace(ns)))
	return int64(len(all.Items))
}

// setUsed sets the quota's status to n Secrets used.
func (sq *secretQuota) setUsed(n int64) {
	ctx := context.Background()
	require.NoError(sq.t, sq.s.client.Get(ctx, client.ObjectKeyFromObject(sq.q), sq.q))
	sq.q.Status = corev1.ResourceQuotaStatus{Hard: sq.hard, Used: corev1.ResourceList{corev1.ResourceSecrets: *resource.NewQuantity(n, resource.DecimalSI)}}
	require.NoError(sq.t, sq.s.client.Status().Update(ctx, sq.q))
}

// recount sets the quota's status to the Secrets its namespace holds, as the controller
// does on a Secret's deletion.
func (sq *secretQuota) recount() { sq.setUsed(sq.count(sq.q.Namespace)) }

// used is how many Secrets the quota's status says are used (admission charges a create
// there before the storage answers).
func (sq *secretQuota) used() int64 {
	var got corev1.ResourceQuota
	require.NoError(sq.t, sq.s.client.Get(context.Background(), client.ObjectKeyFromObject(sq.q), &got))
	u := got.Status.Used[corev1.ResourceSecrets]
	return u.Value()
}

// fillSecretQuota is the attack step of the quota attacks: w, a principal that may only
// create Secrets in namespace ns, fills its Secret quota (filler-0, filler-1, ...).
func fillSecretQuota(t testing.TB, w client.Client, ns string) {
	t.Helper()
	for i := range 10 {
		err := w.Create(context.Background(), secret(ns, fmt.Sprintf("filler-%d", i), nil, map[string][]byte{"x": []byte("x")}))
		if err != nil {
			require.True(t, apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"), "the filler is refused by the quota: %v", err)
			return
		}
	}
	t.Fatalf("the Secret quota of %s is not full after 10 fillers", ns)
}

// quotaProvider is a provider installed alone, for the attacks on its nonce of consumer
// cl-consumer: createNonce runs liqoctl create nonce as its administrator, and nonce reads
// the nonce Secret.
type quotaProvider struct {
	t          testing.TB
	p          *site
	consumerID string
	tn         string
}

// newQuotaProvider installs provider cl-provider on a control plane of its own.
func newQuotaProvider(t testing.TB, name string) *quotaProvider {
	t.Helper()
	const consumerID = "cl-consumer"
	return &quotaProvider{t: t, p: installSites(t, testenv.New(t, name), "cl-provider")[0], consumerID: consumerID, tn: wire.TenantNamespaceName(consumerID)}
}

// createNonce is liqoctl create nonce for the consumer, as the provider's administrator:
// its stderr and error.
func (n *quotaProvider) createNonce() (string, error) {
	_, errOut, err := runCLI(n.t, "create", "nonce", "--kubeconfig", n.p.cp.Kubeconfig, "--remote-cluster-id", n.consumerID)
	return errOut, err
}

// nonce reads the provider's nonce Secret for the consumer.
func (n *quotaProvider) nonce() (*corev1.Secret, error) {
	var s corev1.Secret
	err := n.p.client.Get(context.Background(), client.ObjectKey{Namespace: n.tn, Name: wire.NonceSecretName}, &s)
	return &s, err
}
