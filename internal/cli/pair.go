package cli

import (
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// NewPair connects to the local cluster (consumer) and the remote one (provider).
func NewPair(g *Global, remote *ClusterFlags) (*handshake.Pair, error) {
	c, err := g.Local.Side(handshake.Local, g.Printer().Scoped(handshake.Local))
	if err != nil {
		return nil, err
	}
	remote.policy = g.PluginPolicy
	p, err := remote.Side(handshake.Remote, g.Printer().Scoped(handshake.Remote))
	if err != nil {
		return nil, err
	}
	c.AdoptTenantNamespace, p.AdoptTenantNamespace = g.AdoptTenantNamespace, g.AdoptTenantNamespace
	return &handshake.Pair{Consumer: c, Provider: p}, nil
}
