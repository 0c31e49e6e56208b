package handshake

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Identify reads both cluster IDs, and what tells the clusters apart, at once, and refuses
// a pair that is one cluster.
func (p *Pair) Identify(ctx context.Context) error {
	var eg errgroup.Group
	eg.Go(func() error { return p.Consumer.Identify(ctx) })
	eg.Go(func() error { return p.Provider.Identify(ctx) })
	// Read now, with the IDs; CheckDistinct weighs a failure to read them.
	eg.Go(func() error { _, _ = p.Consumer.SystemUID(ctx); return nil })
	eg.Go(func() error { _, _ = p.Provider.SystemUID(ctx); return nil })
	if err := eg.Wait(); err != nil {
		return err
	}
	if pu := p.Provider.peeringUser; pu != nil && pu.consumer() != p.Consumer.ClusterID {
		return p.Provider.Errorf("peering user %s was issued for cluster %q, not this cluster %q: everything it would do for another cluster is forbidden; ask the provider's administrator for one for this cluster (liqoctl generate peering-user --consumer-cluster-id %s)",
			pu.User, pu.consumer(), p.Consumer.ClusterID, p.Consumer.ClusterID)
	}
	return CheckDistinct(ctx, p.Consumer, p.Provider)
}

// Starter starts, on one side, the controllers the handshake needs there when nobody runs
// them, and says whether it did; they fill their caches in the background.
type Starter func(ctx context.Context, s *Side) (started bool, err error)

// Started says on which sides a Starter started controllers.
type Started struct{ Consumer, Provider bool }

// InspectStarting reads the state of the pair while the controllers of each side start,
// ensuring the tenant namespaces on the way (Authenticate's first step, which the state
// then says is done): the Tenant and the Identity are read in them.
// The provider's controllers are needed only while the Tenant is not accepted with a
// valid certificate: a pair that got that far completes without them (a peering user whose
// provider stopped its manager), so their failure to start is an error only before that.
func (p *Pair) InspectStarting(ctx context.Context, consumer, provider Starter) (*State, Started, error) {
	var st *State
	var started Started
	var errProvider error
	var eg errgroup.Group
	eg.Go(func() (err error) { st, err = p.inspect(ctx, true); return err })
	eg.Go(func() (err error) { started.Consumer, err = consumer(ctx, p.Consumer); return err })
	var wg sync.WaitGroup
	wg.Go(func() { started.Provider, errProvider = provider(ctx, p.Provider) })
	err := eg.Wait()
	wg.Wait()
	if err != nil {
		return nil, started, err
	}
	if errProvider != nil && !st.TenantAccepted {
		return nil, started, errProvider
	}
	return st, started, nil
}

// AuthenticateWhileSyncing runs the handshake from st while the controllers started
// fill their caches (synced returns once they have, or why they could not): the first
// steps need no controller. Should the caches fail to fill, the handshake stops with their
// reason.
func (p *Pair) AuthenticateWhileSyncing(ctx context.Context, st *State, synced func(context.Context) error) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var syncErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if syncErr = synced(ctx); syncErr != nil {
			stop()
		}
	}()
	_, err := p.Authenticate(ctx, st)
	if err != nil {
		stop()
		if <-done; syncErr != nil && !errors.Is(syncErr, context.Canceled) {
			return syncErr
		}
	}
	return err
}
