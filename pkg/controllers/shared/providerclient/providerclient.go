// Package providerclient builds, on a consumer, a client of a provider from an Identity:
// its certificate for one of this cluster's keys and its user, chaining to the pinned CA.
package providerclient

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ProviderConfig builds the client configuration of an identity from the fields liqo-auth
// writes in its kubeconfig, and only those: the server, its CA, the proxy, the client
// certificate and key. Whoever may write the Secret could have put anything else there
// (exec plugins, token files, auth providers), so the kubeconfig is only parsed, never
// loaded; it must agree with the Identity, hold this cluster's own key and a certificate
// for it, and present the provider CA (and reach it through the proxy) pinned in this
// cluster's tenant record.
func ProviderConfig(ctx context.Context, c client.Reader, liqoNS string, key crypto.Signer, clusterID string, id *authv1beta1.Identity, kubeconfig []byte, now time.Time) (*rest.Config, error) {
	return ProviderConfigFor(ctx, c, liqoNS, cluster.KeySet{Current: key}, clusterID, id, kubeconfig, now)
}

// ProviderConfigFor is ProviderConfig for a cluster with several keys (around a rotation):
// the kubeconfig must hold one key of keys and a certificate for that key.
func ProviderConfigFor(ctx context.Context, c client.Reader, liqoNS string, keys cluster.KeySet, clusterID string, id *authv1beta1.Identity, kubeconfig []byte, now time.Time) (*rest.Config, error) {
	info, err := authn.ReadKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	ap := id.Spec.AuthParams
	switch {
	case info.Server != ap.APIServer:
		return nil, fmt.Errorf("it points at %q, the Identity at %q", info.Server, ap.APIServer)
	case !bytes.Equal(info.CA, ap.CA):
		return nil, fmt.Errorf("its CA is not the Identity's")
	case info.ProxyURL != ptr.Deref(ap.ProxyURL, ""):
		return nil, fmt.Errorf("its proxy %q is not the Identity's", info.ProxyURL)
	}
	if validateServerURLErr := authn.ValidateServerURL(info.Server); validateServerURLErr != nil {
		return nil, validateServerURLErr
	}
	held, err := authn.ParsePrivateKey(info.KeyPEM)
	if err != nil {
		return nil, err
	}
	key := keys.Holding(held.Public())
	if key == nil {
		return nil, fmt.Errorf("it holds another key than this cluster's")
	}
	if _, verifyCertificateErr := authn.VerifyCertificate(info.CertPEM, info.CA, key.Public(), clusterID, now); verifyCertificateErr != nil {
		return nil, verifyCertificateErr
	}
	if checkPinsErr := checkPins(ctx, c, liqoNS, string(id.Spec.ClusterID), info); checkPinsErr != nil {
		return nil, checkPinsErr
	}
	// Not client-go's default of 5 requests/s, 10 at once: a controller keeps this client
	// as long as the kubeconfig, and that default would pace every request once a few
	// slices drained it. The provider's API server protects itself (priority and fairness).
	cfg := &rest.Config{Host: info.Server, TLSClientConfig: rest.TLSClientConfig{CAData: info.CA, CertData: info.CertPEM, KeyData: info.KeyPEM},
		QPS: 100, Burst: 200}
	if info.ProxyURL != "" {
		u, err := url.Parse(info.ProxyURL)
		if err != nil {
			return nil, err
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	return cfg, nil
}

// checkPins verifies a kubeconfig's CA and proxy against those this cluster pinned for
// provider in its tenant record.
func checkPins(ctx context.Context, c client.Reader, liqoNS, provider string, info *authn.KubeconfigInfo) error {
	fp, err := authn.CAFingerprint(info.CA)
	if err != nil {
		return err
	}
	rec, err := cluster.GetTenantRecord(ctx, c, liqoNS, provider)
	if err != nil {
		return err
	}
	if rec == nil || rec.CAFingerprint != fp {
		return fmt.Errorf("its CA %s is not the one pinned for provider %q", fp, provider)
	}
	return rec.CheckIdentityProxy(liqoNS, provider, info.ProxyURL)
}

// New returns a client of a provider from cfg (ProviderConfig's) and the scheme s. Its
// mapper knows, without asking the provider, the kinds a consumer's controllers use there:
// this project's kinds of s (every one namespaced) and Leases (the consumer's presence).
// Any other kind is looked up by discovery when first used. The default mapper would ask
// GET /api and GET /apis (the aggregated document of every group, tens of KiB) before the
// first request of every new client, that is after every handshake and renewal.
func New(cfg *rest.Config, s *runtime.Scheme) (client.WithWatch, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	discovered, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper(nil)
	for gvk := range s.AllKnownTypes() {
		if gvk.GroupVersion() == authv1beta1.GroupVersion && !strings.HasSuffix(gvk.Kind, "List") {
			known.Add(gvk, meta.RESTScopeNamespace)
		}
	}
	known.Add(coordinationv1.SchemeGroupVersion.WithKind("Lease"), meta.RESTScopeNamespace)
	mapper := meta.FirstHitRESTMapper{MultiRESTMapper: meta.MultiRESTMapper{known, discovered}}
	return client.NewWithWatch(cfg, client.Options{Scheme: s, HTTPClient: hc, Mapper: mapper})
}
