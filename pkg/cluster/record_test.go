package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTenantRecordRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := &TenantRecord{RemoteID: "cl-a", Namespace: "liqo-tenant-cl-a", NamespaceUID: "uid", CAFingerprint: "sha256:ff"}
	rec.AddCertificate(IssuedCertificate{Serial: "01", NotAfter: now.Add(time.Hour), KeyFingerprint: "sha256:k1"}, now)
	rec.AddCertificate(IssuedCertificate{Serial: "01", NotAfter: now.Add(time.Hour)}, now)
	rec.AddCertificate(IssuedCertificate{Serial: "02", NotAfter: now.Add(30 * time.Minute)}, now)
	require.Len(t, rec.Certificates, 2, "a serial is recorded once")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kept": "yes"}}}
	require.NoError(t, rec.writeTo(cm))
	assert.Equal(t, "yes", cm.Labels["kept"], "labels of others are kept")
	assert.Equal(t, "true", cm.Labels[TenantRecordLabel])
	assert.Equal(t, "cl-a", cm.Labels[RemoteClusterIDLabel])
	back, err := recordFromConfigMap("cl-a", cm)
	require.NoError(t, err)
	assert.Equal(t, rec.Namespace, back.Namespace)
	assert.Equal(t, rec.NamespaceUID, back.NamespaceUID)
	assert.Equal(t, rec.CAFingerprint, back.CAFingerprint)
	valid := back.Valid(now)
	require.Len(t, valid, 2)
	assert.Equal(t, "02", valid[0].Serial, "soonest expiry first")
	assert.Empty(t, back.Valid(now.Add(2*time.Hour)), "expired certificates are not valid")
	back.AddCertificate(IssuedCertificate{Serial: "03", NotAfter: now.Add(3 * time.Hour)}, now.Add(2*time.Hour))
	assert.Len(t, back.Certificates, 1, "expired certificates are forgotten when a new one is added")

	empty := &TenantRecord{RemoteID: "cl-b"}
	require.NoError(t, empty.writeTo(cm))
	assert.NotContains(t, cm.Data, recordCertsKey)
	assert.NotContains(t, cm.Data, recordCAKey)
	cm.Data[recordCertsKey] = "{not json"
	_, err = recordFromConfigMap("cl-b", cm)
	assert.ErrorContains(t, err, "certificates")
	var nilRec *TenantRecord
	assert.Empty(t, nilRec.Valid(now))
}

func TestBindingString(t *testing.T) {
	b := Binding{Kind: "RoleBinding", Namespace: "team", Name: "edit", RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "cl-a"}}
	assert.Equal(t, `RoleBinding "edit" in namespace "team" (ClusterRole "edit" to User "cl-a")`, b.String())
}

func TestManagerRulesWriteNothingClusterWide(t *testing.T) {
	for _, r := range ManagerRules() {
		for _, v := range r.Verbs {
			if v == "create" || v == "update" || v == "patch" || v == "delete" {
				for _, res := range r.Resources {
					assert.NotContains(t, []string{"secrets", "roles", "rolebindings", "leases", "configmaps", "clusterrolebindings", "clusterroles"}, res,
						"the cluster-wide role may not write %s", res)
				}
			}
		}
	}
}

func TestDefaultManagerImage(t *testing.T) {
	for v, want := range map[string]string{
		"v1.2.3":       ManagerImageRepository + ":v1.2.3",
		"1.2.3":        ManagerImageRepository + ":1.2.3",
		"v1.2.3-rc.1":  ManagerImageRepository + ":v1.2.3-rc.1",
		"dev":          "",
		"600d733":      "",
		"v1.2.3-dirty": ManagerImageRepository + ":v1.2.3-dirty",
		"v1.2":         "",
	} {
		assert.Equal(t, want, DefaultManagerImage(v), v)
	}
}

func TestManifestObjectsHoldNoSecrets(t *testing.T) {
	objs, err := ManifestObjects(InstallOptions{Namespace: "liqo"}, "img:1")
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		switch obj := o.(type) {
		case *corev1.Secret:
			assert.Empty(t, obj.Data, "no key in a manifest")
		case *corev1.ConfigMap:
			if obj.Name == ClusterIDConfigMapName {
				assert.Empty(t, obj.Data[ClusterIDKey], "no cluster ID in a release manifest: each cluster needs its own")
			}
		}
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	assert.Subset(t, kinds, []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "Deployment", "PodDisruptionBudget", "Secret", "ConfigMap"})
	withID, err := ManifestObjects(InstallOptions{Namespace: "liqo", ClusterID: "cl-a"}, "")
	require.NoError(t, err)
	for _, o := range withID {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == ClusterIDConfigMapName {
			assert.Equal(t, "cl-a", cm.Data[ClusterIDKey])
		}
		assert.NotEqual(t, "Deployment", o.GetObjectKind().GroupVersionKind().Kind, "no manager without an image")
	}
}
