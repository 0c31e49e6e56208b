package authmanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/controllers/peering"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// peeringSetup is the Peering controller of the consumer side: the handshake's own steps,
// this cluster as the consumer through a live client, the provider through the bootstrap
// credential.
func (o *Options) peeringSetup(mgr ctrl.Manager, d deps) (setup, error) {
	timeout := o.PeeringAttemptTimeout
	if timeout == 0 {
		timeout = DefaultPeeringAttemptTimeout
	}
	// One live client, shared by every attempt: a Side is made per attempt (it caches the
	// cluster key and reports for one Peering), its connection is the manager's.
	cfg := mgr.GetConfig()
	live, err := client.NewWithWatch(cfg, client.Options{Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("a client for the Peering controller: %w", err)
	}
	return &peering.Reconciler{
		Client: d.c, APIReader: d.reader, LiqoNamespace: o.Namespace, ClusterID: o.ClusterID, Recorder: d.rec, AttemptTimeout: timeout,
		Consumer: func(r handshake.Reporter) (*handshake.Side, error) {
			return &handshake.Side{Scope: handshake.Local, Client: live, Config: cfg, HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper(),
				Namespace: o.Namespace, Report: r}, nil
		},
		Dial: DialKubeconfig,
		Steps: peering.Steps{
			Authenticate: authenticatePair,
			Retire:       handshake.RetirePeeringUser,
			Leave:        handshake.Leave,
		},
	}, nil
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

// PeeringsServed says whether the cluster behind mapper serves Peerings (its CRD is
// installed).
func PeeringsServed(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(schema.GroupKind{Group: authv1beta1.GroupVersion.Group, Kind: "Peering"}, authv1beta1.GroupVersion.Version)
	return err == nil
}

// RestartWhenPeeringsServed is a Runnable for a manager started before the Peering CRD was
// installed: it watches that CRD alone and, once it is established, ends the manager with
// an error that says so, for its Deployment (or supervisor) to start it again, now
// carrying out Peerings. A manager whose cluster never gets the CRD runs on unchanged.
type RestartWhenPeeringsServed struct {
	// Client may get and watch the CRD by name.
	Client client.WithWatch
}

// ErrPeeringsServed ends a manager started before the Peering CRD was installed.
var ErrPeeringsServed = errors.New("the Peering CRD is now installed: restarting to carry out Peerings")

// Start waits for the CRD, and returns ErrPeeringsServed once it is established.
func (r RestartWhenPeeringsServed) Start(ctx context.Context) error {
	return restartCondition{client: r.Client, newList: func() client.ObjectList { return &apiextensionsv1.CustomResourceDefinitionList{} },
		opts: []client.ListOption{client.MatchingFields{"metadata.name": wire.PeeringsCRDName}},
		met: func(o runtime.Object, _ bool) bool {
			crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
			return ok && established(crd)
		},
		reached: ErrPeeringsServed, what: "watching for the Peering CRD"}.wait(ctx)
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
