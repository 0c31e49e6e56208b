package installer

import (
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/sizing"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// ManagerImageRepository is where releases publish the liqo-auth-manager image, tagged
// with the release version.
const ManagerImageRepository = "ghcr.io/liqo-auth/liqo-auth-manager"

// managerUID is the user the manager runs as: no root, no name needed (the image has no
// /etc/passwd).
const managerUID = 65532

// ForgeManagerObjects are the Deployment that runs liqo-auth-manager inside a cluster (two
// replicas, one leader), with image and extra arguments, as the ServiceAccount
// InstallObjects creates, and its PodDisruptionBudget. The pod passes the restricted Pod
// Security Standard.
func ForgeManagerObjects(ns, image string, args []string) []client.Object {
	selector := map[string]string{"app.kubernetes.io/name": wire.ManagerName}
	labels := map[string]string{"app.kubernetes.io/name": wire.ManagerName, wire.ManagedByLabel: wire.ManagedByValue}
	meta := metav1.ObjectMeta{Name: wire.ManagerName, Namespace: ns, Labels: labels}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("healthz")}}, PeriodSeconds: 10}
	}
	return []client.Object{
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: wire.ManagerName,
						SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](managerUID),
							RunAsGroup: ptr.To[int64](managerUID), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
						Containers: []corev1.Container{{
							Name: "manager", Image: image,
							// A tag such as :latest would default to Always, and a node whose runtime
							// was given the image (an air-gapped cluster, a local one) would still pull.
							ImagePullPolicy: corev1.PullIfNotPresent,
							Args: append([]string{"--namespace=" + ns, "--leader-elect", "--health-probe-bind-address=:8081",
								"--metrics-bind-address=:8443", "--metrics-secure"}, args...),
							Ports:          []corev1.ContainerPort{{Name: "healthz", ContainerPort: 8081}, {Name: "metrics", ContainerPort: 8443}},
							ReadinessProbe: probe("/readyz"),
							LivenessProbe:  probe("/healthz"),
							SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
								RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
							Resources: corev1.ResourceRequirements{
								Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
								// About 20 KiB of live heap per consumer (docs/operations.md, "Sizing a
								// provider"): the limit holds over 10,000 consumers under the manager's
								// Go memory limit, with room for its collector (sizing.ManagerFleet).
								Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(sizing.ManagerMemoryLimit)}},
						}},
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selector}},
						}}}},
					},
				},
			},
		},
		&policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
			ObjectMeta: meta,
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: selector}},
		},
	}
}

// ManifestObjects are what liqoctl install -o yaml prints, and the release manifest
// (with managerImage set and no cluster ID): the install objects, the cluster-ID
// ConfigMap (empty without o.ClusterID) and an empty key Secret, which liqo-auth-manager
// fills at its first start, and, with managerImage, its Deployment.
func ManifestObjects(o InstallOptions, managerImage string) ([]client.Object, error) {
	objs, err := InstallObjects(o)
	if err != nil {
		return nil, err
	}
	objs = append(objs, cluster.ForgeClusterIDConfigMap(o.Namespace, o.ClusterID), cluster.ForgeKeysSecret(o.Namespace))
	if managerImage != "" {
		objs = append(objs, ForgeManagerObjects(o.Namespace, managerImage, nil)...)
	}
	return objs, nil
}

// DefaultManagerImage is the released image of liqo-auth-manager for a liqoctl of version v
// ("" for a development build, which has no released image).
func DefaultManagerImage(v string) string {
	// The versions releases stamp: 1.2.3 or v1.2.3, with a pre-release suffix or not.
	if !regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`).MatchString(v) {
		return ""
	}
	return ManagerImageRepository + ":" + v
}
