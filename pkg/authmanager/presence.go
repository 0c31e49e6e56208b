package authmanager

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
)

// Presence announces a liqo-auth-manager that runs without leader election, through the
// same Lease (wire.ManagerName) that leader election would hold: liqoctl reads it (RunningManager)
// and does not start controllers of its own beside a running manager.
//
// It takes the Lease only when nobody holds it or its holder let it go stale, so it never
// takes it from a leader-elected manager that is alive. It renews the Lease every Renew and
// releases it when its context ends, as leader election with ReleaseOnCancel does.
type Presence struct {
	Client    client.Client
	Namespace string
	// Identity is written as the Lease holder.
	Identity string
	// Duration is how long the Lease stays fresh without a renewal; Renew how often it is
	// renewed (Renew < Duration).
	Duration, Renew time.Duration
	Logger          logr.Logger
	Now             func() time.Time
}

// NeedLeaderElection is false: presence is what a manager without leader election has.
func (p *Presence) NeedLeaderElection() bool { return false }

// Start keeps the Lease until ctx ends, then releases it.
func (p *Presence) Start(ctx context.Context) error {
	if p.Now == nil {
		p.Now = time.Now
	}
	tick := time.NewTicker(p.Renew)
	defer tick.Stop()
	held := ""
	for {
		holder, err := p.hold(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.Logger.Error(err, "announcing this manager in its Lease", "lease", wire.ManagerName)
		case holder == p.Identity && held != p.Identity:
			p.Logger.Info("acquired lease to announce this manager (leader election is off)", "lease", p.Namespace+"/"+wire.ManagerName, "identity", p.Identity)
		case holder != held && holder != p.Identity:
			p.Logger.Info("another liqo-auth-manager holds the Lease; both reconcile", "lease", wire.ManagerName, "holder", holder)
		}
		held = holder
		select {
		case <-ctx.Done():
			release, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return p.release(release)
		case <-tick.C:
		}
	}
}

// hold creates, renews or takes over the Lease, and returns who holds it afterwards.
func (p *Presence) hold(ctx context.Context) (string, error) {
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: p.Namespace, Name: wire.ManagerName}
	err := p.Client.Get(ctx, key, &lease)
	absent := apierrors.IsNotFound(err)
	switch {
	case absent:
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: wire.ManagerName}}
	case err != nil:
		return "", fmt.Errorf("reading Lease %s: %w", key, err)
	default:
		if holder, fresh := LeaseHolder(&lease, p.Now()); fresh && holder != p.Identity {
			return holder, nil
		}
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	maps.Copy(lease.Labels, VersionLabels())
	now := metav1.NewMicroTime(p.Now())
	s := &lease.Spec
	if ptr.Deref(s.HolderIdentity, "") != p.Identity {
		s.HolderIdentity, s.AcquireTime = ptr.To(p.Identity), &now
		if !absent {
			s.LeaseTransitions = ptr.To(ptr.Deref(s.LeaseTransitions, 0) + 1)
		}
	}
	s.LeaseDurationSeconds, s.RenewTime = ptr.To(int32(p.Duration/time.Second)), &now
	if absent {
		err = p.Client.Create(ctx, &lease)
	} else {
		err = p.Client.Update(ctx, &lease)
	}
	if err != nil {
		return "", fmt.Errorf("holding Lease %s: %w", key, err)
	}
	return p.Identity, nil
}

// release gives the Lease up if this manager holds it: liqoctl then sees no manager at once.
func (p *Presence) release(ctx context.Context) error {
	var lease coordinationv1.Lease
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: wire.ManagerName}, &lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != p.Identity {
		return nil
	}
	now := metav1.NewMicroTime(p.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = ptr.To(""), ptr.To(int32(1)), &now
	if err := p.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("releasing Lease %s/%s: %w", p.Namespace, wire.ManagerName, err)
	}
	return nil
}
