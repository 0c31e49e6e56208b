package authn

import (
	"crypto"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// KubeconfigParams is what a consumer needs to forge the kubeconfig of an identity.
type KubeconfigParams struct {
	// ClusterName names the cluster entry: the provider's cluster ID.
	ClusterName string
	// User names the user entry: the consumer's cluster ID, the certificate's CN.
	User string
	// Server is the provider API server URL (https).
	Server string
	// CA is the PEM CA bundle for Server.
	CA []byte
	// ProxyURL is an optional proxy towards Server (http, https or socks5).
	ProxyURL string
	// CertPEM is the client certificate signed by the provider.
	CertPEM []byte
	// Key is the consumer's private key; it must match CertPEM.
	Key crypto.Signer
	// Namespace is the default namespace of the context: the provider's tenant namespace.
	Namespace string
}

// ForgeKubeconfig verifies the certificate against the key and the CA, then builds a
// kubeconfig with one cluster, one user and one current context. It refuses to forge a
// kubeconfig that could not work or that would trust something unexpected.
func ForgeKubeconfig(p KubeconfigParams, now time.Time) ([]byte, error) {
	if err := ValidateServerURL(p.Server); err != nil {
		return nil, err
	}
	if err := ValidateProxyURL(p.ProxyURL); err != nil {
		return nil, err
	}
	if _, err := VerifyCertificate(p.CertPEM, p.CA, p.Key.Public(), p.User, now); err != nil {
		return nil, err
	}
	keyPEM, err := MarshalPrivateKey(p.Key)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[p.ClusterName] = &clientcmdapi.Cluster{Server: p.Server, CertificateAuthorityData: p.CA, ProxyURL: p.ProxyURL}
	cfg.AuthInfos[p.User] = &clientcmdapi.AuthInfo{ClientCertificateData: p.CertPEM, ClientKeyData: keyPEM}
	cfg.Contexts[p.ClusterName] = &clientcmdapi.Context{Cluster: p.ClusterName, AuthInfo: p.User, Namespace: p.Namespace}
	cfg.CurrentContext = p.ClusterName
	return runtime.Encode(clientcmdlatest.Codec, cfg)
}

// loadKubeconfig decodes a kubeconfig as clientcmd.Load does, with the codec alone:
// clientcmd's loader links a whole client (rest, transport, credential plugins), which the
// protocol code does not need to read a file.
func loadKubeconfig(data []byte) (*clientcmdapi.Config, error) {
	cfg := clientcmdapi.NewConfig()
	if len(data) == 0 {
		return cfg, nil
	}
	decoded, _, err := clientcmdlatest.Codec.Decode(data, &schema.GroupVersionKind{Version: clientcmdlatest.Version, Kind: "Config"}, cfg)
	if err != nil {
		return nil, err
	}
	out, ok := decoded.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("decoded %T, not a kubeconfig", decoded)
	}
	return out, nil
}

// KubeconfigInfo is what an identity kubeconfig holds: nothing but a server, its CA, an
// optional proxy, and an embedded client certificate and key.
type KubeconfigInfo struct {
	Server    string
	Namespace string
	ProxyURL  string
	CertPEM   []byte
	KeyPEM    []byte
	CA        []byte
}

// ReadKubeconfig parses a kubeconfig forged by ForgeKubeconfig (or compatible: one current
// context with embedded certificate data) and returns what it points at. It only parses:
// it never runs or reads anything the kubeconfig names, and it refuses one that authenticates
// or trusts in any other way (exec or auth-provider plugins, tokens, token or certificate
// files, basic auth, impersonation, skipped TLS verification), because a kubeconfig read
// from a Secret is written by whoever may write that Secret.
func ReadKubeconfig(data []byte) (*KubeconfigInfo, error) {
	if len(data) > 4*MaxCertificateSize {
		return nil, refuse(ReasonKubeconfigInvalid, "the kubeconfig is too large", nil)
	}
	cfg, err := loadKubeconfig(data)
	if err != nil {
		return nil, refuse(ReasonKubeconfigInvalid, "the kubeconfig cannot be parsed", err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || ctx == nil {
		return nil, refuse(ReasonKubeconfigInvalid, fmt.Sprintf("the kubeconfig has no current context %q", cfg.CurrentContext), nil)
	}
	cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cluster == nil || user == nil {
		return nil, refuse(ReasonKubeconfigInvalid, "the kubeconfig context refers to a missing cluster or user", nil)
	}
	// What the kubeconfig would run or send is refused first: a kubeconfig made of a
	// credential plugin alone (a cloud administrator's) is refused as that, not as merely
	// incomplete.
	if extra := foreignCredentials(cluster, user); len(extra) > 0 {
		return nil, refuse(ReasonKubeconfigForeignCredentials, fmt.Sprintf("the kubeconfig carries %s: an identity kubeconfig holds only an embedded client certificate and key", strings.Join(extra, ", ")), nil)
	}
	if len(user.ClientCertificateData) == 0 {
		return nil, refuse(ReasonKubeconfigInvalid, "the kubeconfig user has no embedded client certificate", nil)
	}
	return &KubeconfigInfo{Server: cluster.Server, Namespace: ctx.Namespace, ProxyURL: cluster.ProxyURL,
		CertPEM: user.ClientCertificateData, KeyPEM: user.ClientKeyData, CA: cluster.CertificateAuthorityData}, nil
}

// foreignCredentials names what a kubeconfig carries beyond embedded certificate data.
func foreignCredentials(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) []string {
	var out []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{u.Exec != nil, "an exec credential plugin"},
		{u.AuthProvider != nil, "an auth provider"},
		{u.Token != "", "a token"},
		{u.TokenFile != "", "a token file"},
		{u.Username != "" || u.Password != "", "basic-auth credentials"},
		{u.ClientCertificate != "", "a client certificate file"},
		{u.ClientKey != "", "a client key file"},
		{u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0, "impersonation"},
		{c.CertificateAuthority != "", "a CA file"},
		{c.InsecureSkipTLSVerify, "insecure-skip-tls-verify"},
		{c.TLSServerName != "", "a TLS server name override"},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// ValidateServerURL checks an API server URL handed over by a provider: absolute https,
// with a host, without credentials, query or fragment.
func ValidateServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return refuse(ReasonServerURLInvalid, fmt.Sprintf("the API server URL %q must be https://host[:port][/path], without credentials, query or fragment", s), err)
	}
	return nil
}

// ValidateProxyURL checks an optional proxy URL: empty, or http, https or socks5 with a host.
func ValidateProxyURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
		return refuse(ReasonProxyURLInvalid, fmt.Sprintf("the proxy URL %q must be http, https or socks5 with a host", s), err)
	}
	return nil
}
