package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	authv1beta1 "github.com/liqo-auth/liqo-auth/pkg/apis/authentication/v1beta1"
)

func TestPrinterPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := NewPrinter(&b, 0)
	p.Scoped("local").Info("Tenant namespace correctly ensured")
	p.Scoped("remote").Warn("careful %d", 1)
	p.Info("unscoped")
	p.Debug("hidden without -v")
	p.Error(errors.New("boom"))
	assert.Equal(t, "INFO (local) Tenant namespace correctly ensured\nWARN (remote) careful 1\nINFO unscoped\nERROR boom\n", b.String())

	b.Reset()
	v := NewPrinter(&b, 1)
	v.Scoped("remote").Info("step")
	assert.Regexp(t, `^INFO \(remote\) \[ *\d+\.\d{3}s\] step\n$`, b.String(), "-v adds the elapsed time")
}

func TestPrintObjects(t *testing.T) {
	tn := &authv1beta1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: authv1beta1.TenantSpec{ClusterID: "a"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	var b bytes.Buffer
	require.NoError(t, PrintObjects(&b, "yaml", tn, cm))
	out := b.String()
	assert.Contains(t, out, "apiVersion: authentication.liqo.io/v1beta1\nkind: Tenant\n")
	assert.Contains(t, out, "---\napiVersion: v1\nkind: ConfigMap\n")
	assert.NotContains(t, out, "creationTimestamp")
	assert.NotContains(t, out, "status")

	b.Reset()
	require.NoError(t, PrintObjects(&b, "json", tn))
	assert.True(t, strings.HasPrefix(b.String(), "{\n"))
	assert.Contains(t, b.String(), `"kind": "Tenant"`)
	b.Reset()
	require.NoError(t, PrintObjects(&b, "json", tn, cm))
	assert.Contains(t, b.String(), `"kind": "List"`)

	for f, ok := range map[string]bool{"": true, "yaml": true, "json": true, "xml": false, "YAML": false} {
		err := (&OutputFlags{Format: f}).Validate()
		assert.Equal(t, ok, err == nil, f)
	}
}

func TestFormatRules(t *testing.T) {
	out := FormatRules([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{"authentication.liqo.io"}, Resources: []string{"tenants"}, ResourceNames: []string{"x"}, Verbs: []string{"get", "watch"}},
	})
	assert.Contains(t, out, "core/configmaps")
	assert.Contains(t, out, "authentication.liqo.io/tenants")
	assert.Contains(t, out, "get,watch (only x)")
}

func TestRequireRemote(t *testing.T) {
	assert.Error(t, (&ClusterFlags{}).RequireRemote())
	assert.NoError(t, (&ClusterFlags{Kubeconfig: "k"}).RequireRemote())
	assert.NoError(t, (&ClusterFlags{Context: "c"}).RequireRemote())
}
