package authmanager

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	return restartCondition{client: r.Client, newList: func() client.ObjectList { return &corev1.ConfigMapList{} },
		opts: []client.ListOption{client.InNamespace(r.Namespace), client.MatchingFields{"metadata.name": wire.ConfigMapName}},
		met: func(o runtime.Object, deleted bool) bool {
			cm, ok := o.(*corev1.ConfigMap)
			return ok && !deleted && cm.Name == wire.ConfigMapName && cm.Data[cluster.ConfigAPIServerURL] != ""
		},
		reached: ErrAPIServerKnown, what: fmt.Sprintf("watching %s/%s", r.Namespace, wire.ConfigMapName)}.wait(ctx)
}
