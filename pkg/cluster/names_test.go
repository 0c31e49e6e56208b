package cluster

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

func TestValidateClusterID(t *testing.T) {
	cases := map[string]string{
		"cl-consumer":                          "",
		"a":                                    "",
		"3114c478-173d-4344-8f01-eb21efb95aea": "",
		strings.Repeat("a", 51):                "",
		"":                                     "empty",
		strings.Repeat("a", 52):                "at most 51",
		"Upper":                                "not valid",
		"under_score":                          "not valid",
		"-lead":                                "not valid",
		"trail-":                               "not valid",
		"dot.ted":                              "not valid",
	}
	for id, want := range cases {
		t.Run(id, func(t *testing.T) {
			err := ValidateClusterID(id)
			if want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, want)
		})
	}
	assert.Len(t, wire.TenantNamespaceName(strings.Repeat("a", MaxClusterIDLength)), 63, "the longest ID still makes a valid namespace")
}

func TestNamesAndTenantNamespaceCheck(t *testing.T) {
	assert.Equal(t, "liqo-tenant-x", wire.TenantNamespaceName("x"))
	assert.Equal(t, "controlplane-x", wire.IdentityName("x"))
	assert.Equal(t, "kubeconfig-controlplane-x", wire.KubeconfigSecretName(wire.IdentityName("x")))
	ns := func(l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	assert.True(t, IsTenantNamespaceOf(ns(TenantNamespaceLabels("x")), "x"))
	assert.False(t, IsTenantNamespaceOf(ns(TenantNamespaceLabels("x")), "y"))
	assert.False(t, IsTenantNamespaceOf(ns(map[string]string{wire.RemoteClusterIDLabel: "x"}), "x"), "the tenant label is required")
	assert.False(t, IsTenantNamespaceOf(ns(TenantNamespaceLabels("")), ""), "an empty remote ID matches nothing")
}

func TestConfigMapRoundTrip(t *testing.T) {
	cm := ForgeConfigMap("liqo", Config{APIServerURL: "https://p:6443", APIServerCA: []byte("ca"), CertificateLifetime: 3600e9})
	assert.Equal(t, map[string]string{ConfigAPIServerURL: "https://p:6443", ConfigAPIServerCA: "ca", ConfigCertificateLifetime: "1h0m0s"}, cm.Data)
	assert.Empty(t, ForgeConfigMap("liqo", Config{}).Data)
}
