package cluster

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ForgeManagerObjects are the Deployment that runs liqo-auth-manager inside a cluster,
// with image and extra arguments, as the ServiceAccount InstallObjects creates.
func ForgeManagerObjects(ns, image string, args []string) []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": ManagerName, ManagedByLabel: ManagedByValue}
	meta := metav1.ObjectMeta{Name: ManagerName, Namespace: ns, Labels: labels}
	return []client.Object{
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": ManagerName}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: ManagerName,
						SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
						Containers: []corev1.Container{{
							Name: "manager", Image: image,
							Args:           append([]string{"--namespace=" + ns, "--leader-elect"}, args...),
							Ports:          []corev1.ContainerPort{{Name: "healthz", ContainerPort: 8081}},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("healthz")}}},
							LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}}},
							SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
								Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
						}},
					},
				},
			},
		},
	}
}
