package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Keys of the liqo-auth-config ConfigMap.
const (
	ConfigAPIServerURL        = "apiServerURL"
	ConfigAPIServerCA         = "apiServerCA"
	ConfigCertificateLifetime = "certificateLifetime"
	ConfigNonceTTL            = "nonceTTL"
	// ConfigRequireApproval is "true" when the provider's administrator approves each new
	// consumer (liqoctl install --require-approval); it is written under its own field
	// owner (wire.ApprovalFieldOwner), so that the other settings and it change apart.
	ConfigRequireApproval = "requireApproval"
)

// DefaultNonceTTL is how long a nonce may be used after its Secret was created, unless
// liqoctl install --nonce-ttl or liqo-auth-manager --nonce-ttl says otherwise.
const DefaultNonceTTL = 15 * time.Minute

// NonceTTL is the nonce TTL of this configuration.
func (c Config) NonceTTLOrDefault() time.Duration {
	if c.NonceTTL > 0 {
		return c.NonceTTL
	}
	return DefaultNonceTTL
}

// Config is how a provider presents itself to its consumers.
type Config struct {
	// APIServerURL is the URL consumers use to reach this cluster.
	APIServerURL string
	// APIServerCA is the PEM CA bundle for APIServerURL.
	APIServerCA []byte
	// CertificateLifetime is the lifetime of issued certificates (0: the default).
	CertificateLifetime time.Duration
	// NonceTTL is how long a nonce may be used after its Secret was created (0: the
	// default).
	NonceTTL time.Duration
	// RequireApproval: a consumer gets no certificate until this cluster's administrator
	// approved the key of its handshake (liqoctl approve tenant).
	RequireApproval bool
}

// GetConfig reads the liqo-auth-config ConfigMap; a missing one is an empty Config.
func GetConfig(ctx context.Context, c client.Reader, ns string) (Config, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ConfigMapName}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return Config{}, nil
		}
		return Config{}, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, wire.ConfigMapName, err)
	}
	return configFrom(&cm)
}

// configFrom reads the configuration from the liqo-auth-config ConfigMap cm.
func configFrom(cm *corev1.ConfigMap) (Config, error) {
	ns := cm.Namespace
	cfg := Config{APIServerURL: cm.Data[ConfigAPIServerURL], APIServerCA: []byte(cm.Data[ConfigAPIServerCA])}
	// Anything but "false" (or nothing) requires approval: a setting that cannot be read
	// is the stricter one.
	v := cm.Data[ConfigRequireApproval]
	cfg.RequireApproval = v != "" && v != "false"
	for key, dst := range map[string]*time.Duration{ConfigCertificateLifetime: &cfg.CertificateLifetime, ConfigNonceTTL: &cfg.NonceTTL} {
		if v := cm.Data[key]; v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return Config{}, fmt.Errorf("ConfigMap %s/%s: %s=%q is not a duration", ns, wire.ConfigMapName, key, v)
			}
			*dst = d
		}
	}
	return cfg, nil
}

// ForgeConfigMap builds the liqo-auth-config ConfigMap; empty fields are left out.
func ForgeConfigMap(ns string, cfg Config) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: wire.ConfigMapName, Namespace: ns, Labels: wire.ManagedLabels()},
		Data:       map[string]string{},
	}
	if cfg.APIServerURL != "" {
		cm.Data[ConfigAPIServerURL] = cfg.APIServerURL
	}
	if len(cfg.APIServerCA) > 0 {
		cm.Data[ConfigAPIServerCA] = string(cfg.APIServerCA)
	}
	if cfg.CertificateLifetime > 0 {
		cm.Data[ConfigCertificateLifetime] = cfg.CertificateLifetime.String()
	}
	if cfg.NonceTTL > 0 {
		cm.Data[ConfigNonceTTL] = cfg.NonceTTL.String()
	}
	if cfg.RequireApproval {
		cm.Data[ConfigRequireApproval] = "true"
	}
	return cm
}

// ForgeApprovalConfigMap builds the liqo-auth-config ConfigMap with only the approval
// setting, for a server-side apply as wire.ApprovalFieldOwner: it changes that setting and
// keeps the others, whoever set them.
func ForgeApprovalConfigMap(ns string, require bool) *corev1.ConfigMap {
	cm := ForgeConfigMap(ns, Config{})
	cm.Data[ConfigRequireApproval] = strconv.FormatBool(require)
	return cm
}
