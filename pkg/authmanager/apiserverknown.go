package authmanager

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
)

// RestartWhenAPIServerKnown is a Runnable for a provider's manager that started without an
// API server URL to hand consumers (in a Pod, from the release manifest, before its
// administrator said which one): every handshake waits on it. It watches the
// liqo-auth-config ConfigMap alone and, once it names an API server URL, ends the manager
// with ErrAPIServerKnown, for its Deployment to start it again with that URL. It runs in
// every replica (not only the leader): a standby that became leader later would otherwise
// still lack the URL.
type RestartWhenAPIServerKnown struct {
	// Client may list and watch ConfigMaps in Namespace.
	Client client.WithWatch
	// Namespace is the Liqo namespace.
	Namespace string
}

// ErrAPIServerKnown ends a provider's manager that started without an API server URL once
// liqo-auth-config names one.
var ErrAPIServerKnown = errors.New("liqo-auth-config now names the API server URL consumers reach: restarting to hand it to them")

// NeedLeaderElection is false: every replica restarts.
func (RestartWhenAPIServerKnown) NeedLeaderElection() bool { return false }

// Start waits for liqo-auth-config to name an API server URL, and returns
// ErrAPIServerKnown then; nil when ctx ends first.
func (r RestartWhenAPIServerKnown) Start(ctx context.Context) error {
	opts := []client.ListOption{client.InNamespace(r.Namespace), client.MatchingFields{"metadata.name": wire.ConfigMapName}}
	for {
		var list corev1.ConfigMapList
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			return fmt.Errorf("watching %s/%s: %w", r.Namespace, wire.ConfigMapName, err)
		}
		for i := range list.Items {
			if namesAPIServer(&list.Items[i]) {
				return ErrAPIServerKnown
			}
		}
		w, err := r.Client.Watch(ctx, &corev1.ConfigMapList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
		if err != nil {
			return fmt.Errorf("watching %s/%s: %w", r.Namespace, wire.ConfigMapName, err)
		}
		if done, err := untilAPIServerNamed(ctx, w); done || err != nil {
			return err
		}
	}
}

// untilAPIServerNamed reads w until the ConfigMap names an API server URL (done,
// ErrAPIServerKnown), ctx ends (done, nil) or the watch closes (not done).
func untilAPIServerNamed(ctx context.Context, w watch.Interface) (bool, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type != watch.Deleted && namesAPIServer(cm) {
				return true, ErrAPIServerKnown
			}
		}
	}
}

func namesAPIServer(cm *corev1.ConfigMap) bool {
	return cm.Name == wire.ConfigMapName && cm.Data[cluster.ConfigAPIServerURL] != ""
}
