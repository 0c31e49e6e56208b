package info

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/version"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Deployment is the readiness of the manager's Deployment in the Liqo namespace.
type Deployment struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"ready"`
}

// manager reads the manager's Lease and Deployment: whether one runs, since when its
// Lease is stale, and how many of its replicas are ready.
func manager(ctx context.Context, s *handshake.Side, now time.Time) Manager {
	m := Manager{State: ManagerAbsent, detail: "not running: the controllers run only inside liqoctl commands, and certificates are not renewed"}
	switch running, err := authmanager.RunningManager(ctx, s.Client, s.Namespace, now); {
	case err != nil:
		return Manager{State: ManagerUnknown, detail: fmt.Sprintf("unknown: its Lease %s/%s cannot be read: %v", s.Namespace, wire.ManagerName, err)}
	case running != nil:
		m = Manager{State: ManagerRunning, Holder: running.Holder, Version: running.Version, detail: fmt.Sprintf("running (%s), version %s", running.Holder, running.Version)}
		if skew := authmanager.VersionSkew(version.Get().Version, running.Version); skew != "" {
			s.Report.Warn("%s", skew)
		}
	default:
		holder, since, err := authmanager.StaleLease(ctx, s.Client, s.Namespace, now)
		if err == nil && since != nil {
			m.Holder, m.StaleSince = holder, since
			m.detail = fmt.Sprintf("not running: %s", authmanager.DescribeStale(s.Namespace, holder, *since, now))
			s.Report.Warn("%s", authmanager.DescribeStale(s.Namespace, holder, *since, now))
		}
	}
	var d appsv1.Deployment
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: wire.ManagerName}, &d); err == nil {
		m.Deployment = &Deployment{Name: d.Name, Replicas: d.Status.Replicas, Ready: d.Status.ReadyReplicas}
		if d.Spec.Replicas != nil {
			m.Deployment.Replicas = *d.Spec.Replicas
		}
		m.detail += fmt.Sprintf("; Deployment %s/%s %d/%d ready", s.Namespace, d.Name, m.Deployment.Ready, m.Deployment.Replicas)
	}
	return m
}

// providerCA is the API server URL and the fingerprint of the CA consumers reach this
// cluster with (handshake.AdvertisedServer), which liqoctl generate tenant
// --expect-fingerprint pins ahead of time; no fingerprint when no CA is known.
func providerCA(ctx context.Context, s *handshake.Side) (server, fingerprint string, err error) {
	server, ca, err := handshake.AdvertisedServer(ctx, s)
	if err != nil || len(ca) == 0 {
		return server, "", err
	}
	fingerprint, err = authn.CAFingerprint(ca)
	return server, fingerprint, err
}
