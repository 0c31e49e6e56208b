package testenv

import (
	"context"
	"crypto"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// VirtualConsumer is a consumer cluster reduced to its ID and key pair: what a provider
// sees of a consumer. It lets tests and benchmarks put hundreds of consumers against one
// real provider without a control plane each.
type VirtualConsumer struct {
	ID  string
	Key crypto.Signer
}

// NewVirtualConsumers makes n consumers named prefix followed by 000, 001...
func NewVirtualConsumers(prefix string, n int) ([]*VirtualConsumer, error) {
	out := make([]*VirtualConsumer, n)
	for i := range out {
		var err error
		if out[i], err = NewVirtualConsumer(fmt.Sprintf("%s%03d", prefix, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UnthrottledClient is a client of cfg with opts and without client-side rate limit,
// through which virtual consumers act: each stands for a cluster with its own client, so
// that one shared limit must not pace them.
func UnthrottledClient(cfg *rest.Config, opts client.Options) (client.WithWatch, error) {
	unthrottled := rest.CopyConfig(cfg)
	unthrottled.QPS = -1
	return client.NewWithWatch(unthrottled, opts)
}

// NewVirtualConsumer makes a consumer with a fresh Ed25519 key.
func NewVirtualConsumer(id string) (*VirtualConsumer, error) {
	key, err := authn.GenerateKey(authn.Ed25519)
	if err != nil {
		return nil, err
	}
	return &VirtualConsumer{ID: id, Key: key}, nil
}

// Authenticate runs the consumer's handshake against a provider, through the provider
// administrator's client c: nonce, signature, Tenant, wait for the certificate. It
// returns the kubeconfig the consumer would forge from the Tenant status.
func (v *VirtualConsumer) Authenticate(ctx context.Context, c client.WithWatch, providerID string) ([]byte, error) {
	side := &handshake.Side{Scope: handshake.Remote, Client: c, Namespace: wire.DefaultLiqoNamespace, Report: silent{}}
	tn, err := side.EnsureTenantNamespace(ctx, v.ID)
	if err != nil {
		return nil, err
	}
	n, err := handshake.EnsureNonce(ctx, side, tn, v.ID, time.Now())
	if err != nil {
		return nil, err
	}
	nonce := n.Value
	sig, err := authn.SignNonce(v.Key, nonce)
	if err != nil {
		return nil, err
	}
	t, err := handshake.ForgeTenant(v.ID, v.Key, sig, tn, "")
	if err != nil {
		return nil, err
	}
	// As liqoctl's Tenant where a liqo-auth-manager runs (handshake.ApplyTenant), as it does
	// on every provider of these consumers: with the manager's finalizer from the start.
	controllerutil.AddFinalizer(t, wire.TenantFinalizer)
	if createErr := c.Create(ctx, t); createErr != nil {
		return nil, fmt.Errorf("creating the Tenant: %w", createErr)
	}
	if t, err = handshake.WaitTenant(ctx, side, t, time.Now()); err != nil {
		return nil, err
	}
	ap := t.Status.AuthParams
	return authn.ForgeKubeconfig(authn.KubeconfigParams{ClusterName: providerID, User: v.ID, Server: ap.APIServer, CA: ap.CA,
		ProxyURL: ptr.Deref(ap.ProxyURL, ""), CertPEM: ap.SignedCRT, Key: v.Key, Namespace: tn}, time.Now())
}

// silent is a handshake.Reporter that prints nothing.
type silent struct{}

func (silent) Info(string, ...any) {}
func (silent) Warn(string, ...any) {}

// RequestSlice writes, into the consumer's tenant namespace tn on the provider (through
// c), the copy of a ResourceSlice named name as the consumer's controllers write it, and
// waits until the provider issued the slice's certificate, which it returns.
func (v *VirtualConsumer) RequestSlice(ctx context.Context, c client.WithWatch, tn, name string, resources corev1.ResourceList) ([]byte, error) {
	csr, err := authn.ForgeCSRFor(v.Key, authn.SliceUserName(name, v.ID), v.ID)
	if err != nil {
		return nil, err
	}
	id := authv1beta1.ClusterID(v.ID)
	rs := &authv1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn, Name: name, Labels: map[string]string{
			wire.RemoteClusterIDLabel: v.ID, wire.ReplicationStatusLabel: "true", wire.ReplicationOriginLabel: v.ID}},
		Spec: authv1beta1.ResourceSliceSpec{ConsumerClusterID: &id, CSR: csr, Resources: resources},
	}
	if createErr := c.Create(ctx, rs); createErr != nil {
		return nil, fmt.Errorf("creating the ResourceSlice: %w", createErr)
	}
	side := &handshake.Side{Scope: handshake.Remote, Client: c, Namespace: wire.DefaultLiqoNamespace, Report: silent{}}
	got, err := handshake.WaitSlice(ctx, side, client.ObjectKeyFromObject(rs), time.Minute, "does liqo-auth-manager run on the provider?")
	if err != nil {
		return nil, err
	}
	return got.Status.AuthParams.SignedCRT, nil
}
