package handshake

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CheckDistinct refuses a pair whose two kubeconfigs reach the same cluster: same
// kube-system namespace UID (or, when that cannot be read, the same server URL), or the
// same cluster ID.
func CheckDistinct(ctx context.Context, a, b *Side) error {
	same := func(why string) error {
		return fmt.Errorf("--kubeconfig and --remote-kubeconfig reach the same cluster (%s): authentication needs two different clusters", why)
	}
	var ua, ub string
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { ua, errA = a.SystemUID(ctx) })
	wg.Go(func() { ub, errB = b.SystemUID(ctx) })
	wg.Wait()
	switch {
	case errA == nil && errB == nil && ua == ub:
		return same("same kube-system namespace UID " + ua)
	case (errA != nil || errB != nil) && normalizeHost(a.Config.Host) == normalizeHost(b.Config.Host):
		return same("same API server " + a.Config.Host)
	case a.ClusterID != "" && a.ClusterID == b.ClusterID:
		return same("both have cluster ID " + a.ClusterID)
	}
	return nil
}

// SystemUID is the UID of the cluster's kube-system namespace, which tells two clusters
// apart; read once per command.
func (s *Side) SystemUID(ctx context.Context) (string, error) {
	s.uidOnce.Do(func() { s.uid, s.uidErr = systemUID(ctx, s.Client) })
	return s.uid, s.uidErr
}

func systemUID(ctx context.Context, c client.Client) (string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ns); err != nil {
		return "", err
	}
	return string(ns.UID), nil
}

func normalizeHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), "/")
	return strings.TrimSuffix(strings.Replace(h, "localhost", "127.0.0.1", 1), ":443")
}

func isAbsent(err error) bool { return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) }
