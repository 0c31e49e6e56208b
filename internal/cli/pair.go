package cli

import (
	"sync"

	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// NewPair connects to the local cluster (consumer) and the remote one (provider), both at
// once, their clients sharing one scheme. An error of the local side is said first.
func NewPair(g *Global, remote *ClusterFlags) (*handshake.Pair, error) {
	remote.policy = g.PluginPolicy
	sch := scheme.New()
	g.Local.scheme, remote.scheme = sch, sch
	// The printer is made here, once: both sides print through it, under its one lock.
	local, far := g.Printer().Scoped(handshake.Local), g.Printer().Scoped(handshake.Remote)
	var c, p *handshake.Side
	var errC, errP error
	var wg sync.WaitGroup
	wg.Go(func() { c, errC = g.Local.Side(handshake.Local, local) })
	wg.Go(func() { p, errP = remote.Side(handshake.Remote, far) })
	wg.Wait()
	if errC != nil {
		return nil, errC
	}
	if errP != nil {
		return nil, errP
	}
	c.AdoptTenantNamespace, p.AdoptTenantNamespace = g.AdoptTenantNamespace, g.AdoptTenantNamespace
	return &handshake.Pair{Consumer: c, Provider: p}, nil
}
