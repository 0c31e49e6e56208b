package cli

import (
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// NewPair connects to the local cluster (consumer) and the remote one (provider).
func NewPair(g *Global, remote *ClusterFlags) (*handshake.Pair, error) {
	c, err := g.Local.Side("local", g.Printer().Scoped("local"))
	if err != nil {
		return nil, err
	}
	remote.policy = g.PluginPolicy
	p, err := remote.Side("remote", g.Printer().Scoped("remote"))
	if err != nil {
		return nil, err
	}
	c.AdoptTenantNamespace, p.AdoptTenantNamespace = g.AdoptTenantNamespace, g.AdoptTenantNamespace
	return &handshake.Pair{Consumer: c, Provider: p}, nil
}
