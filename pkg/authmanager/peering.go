package authmanager

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/peering"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// peeringSetup is the Peering controller of the consumer side: the handshake's own steps,
// this cluster as the consumer through a live client, the provider through the bootstrap
// credential.
func (o *Options) peeringSetup(mgr ctrl.Manager, d deps) setup {
	timeout := o.PeeringAttemptTimeout
	if timeout == 0 {
		timeout = DefaultPeeringAttemptTimeout
	}
	cfg := mgr.GetConfig()
	return &peering.Reconciler{
		Client: d.c, APIReader: d.reader, LiqoNamespace: o.Namespace, ClusterID: o.ClusterID, Recorder: d.rec, AttemptTimeout: timeout,
		Consumer: func(r handshake.Reporter) (*handshake.Side, error) {
			c, err := client.NewWithWatch(cfg, client.Options{Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()})
			if err != nil {
				return nil, err
			}
			return &handshake.Side{Scope: handshake.Local, Client: c, Config: cfg, HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper(),
				Namespace: o.Namespace, Report: r}, nil
		},
		Dial: DialKubeconfig,
		Steps: peering.Steps{
			Authenticate: authenticatePair,
			Retire:       handshake.RetirePeeringUser,
			Leave:        handshake.Leave,
		},
	}
}

// authenticatePair is liqoctl authenticate's handshake for a declared peering: what is
// in place is read, and the missing steps run. It never waits for the provider's
// administrator's approval: that is a state of the Peering, not a reconcile that blocks.
func authenticatePair(ctx context.Context, p *handshake.Pair) (*authv1beta1.Identity, error) {
	st, err := p.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	return p.Authenticate(ctx, st)
}

// DialKubeconfig connects, as the remote side of a handshake, to the cluster a kubeconfig
// with embedded credentials only (authn.ReadKubeconfig) reaches, reporting through r.
func DialKubeconfig(k *authn.KubeconfigInfo, r handshake.Reporter) (*handshake.Side, error) {
	if err := authn.ValidateServerURL(k.Server); err != nil {
		return nil, fmt.Errorf("the bootstrap kubeconfig's server: %w", err)
	}
	cfg := &rest.Config{Host: k.Server, TLSClientConfig: rest.TLSClientConfig{CAData: k.CA, CertData: k.CertPEM, KeyData: k.KeyPEM},
		UserAgent: "liqo-auth-manager", QPS: 100, Burst: 200, Timeout: 30 * time.Second}
	if k.ProxyURL != "" {
		u, err := url.Parse(k.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("the bootstrap kubeconfig's proxy URL: %w", err)
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", k.Server, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", k.Server, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New(), HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", k.Server, err)
	}
	s := &handshake.Side{Scope: handshake.Remote, Client: c, Config: cfg, HTTPClient: hc, Mapper: mapper, Report: r}
	s.DetectPeeringUser()
	return s, nil
}
