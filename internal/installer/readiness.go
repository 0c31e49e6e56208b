package installer

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// ManagerReadiness is what the manager's Deployment says of itself.
type ManagerReadiness struct {
	Ready     bool
	Available int32
	Replicas  int32
	// Why is, when not ready, what its Pods wait for (unschedulable, image pull...), or
	// that none was created.
	Why string
}

func (r ManagerReadiness) String() string {
	s := fmt.Sprintf("%d/%d replicas available", r.Available, r.Replicas)
	if !r.Ready && r.Why != "" {
		s += ": " + r.Why
	}
	return s
}

// GetManagerReadiness reads the readiness of the Deployment liqo-auth-manager in ns: ready
// when the current generation is rolled out and every replica is available.
func GetManagerReadiness(ctx context.Context, c client.Reader, ns string) (ManagerReadiness, error) {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ManagerName}, &d); err != nil {
		return ManagerReadiness{}, err
	}
	r := ManagerReadiness{Available: d.Status.AvailableReplicas, Replicas: 1}
	if d.Spec.Replicas != nil {
		r.Replicas = *d.Spec.Replicas
	}
	r.Ready = d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == r.Replicas && r.Available >= r.Replicas
	if !r.Ready {
		r.Why = podsWaitFor(ctx, c, ns, d.Spec.Selector.MatchLabels)
	}
	return r, nil
}

// podsWaitFor says what the first Pod that is not running waits for.
func podsWaitFor(ctx context.Context, c client.Reader, ns string, selector map[string]string) string {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
		return ""
	}
	if len(pods.Items) == 0 {
		return "no Pod created yet (kubectl -n " + ns + " describe replicaset shows why)"
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
				return fmt.Sprintf("Pod %s is not scheduled (%s)", p.Name, cond.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				return fmt.Sprintf("Pod %s waits: %s %s", p.Name, w.Reason, w.Message)
			}
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Sprintf("Pod %s is %s", p.Name, p.Status.Phase)
		}
	}
	return "its Pods run but are not ready yet"
}
