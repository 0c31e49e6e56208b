// Package generate groups the generate commands of the manual flow.
package generate

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/generate/identity"
	"github.com/liqo-auth/liqo-auth/internal/cmd/generate/peering"
	"github.com/liqo-auth/liqo-auth/internal/cmd/generate/peeringuser"
	"github.com/liqo-auth/liqo-auth/internal/cmd/generate/tenant"
)

// NewCmd returns the generate command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "generate", Short: "Generate what one cluster's administrator hands to the other's: Tenant, Identity, peering user, Peering", Args: cobra.NoArgs}
	cmd.AddCommand(tenant.NewCmd(g), identity.NewCmd(g), peeringuser.NewCmd(g), peering.NewCmd(g))
	return cmd
}
