// Package generate groups the generate commands of the manual flow.
package generate

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/cmd/generate/identity"
	"github.com/liqo-auth/liqo-auth/pkg/cmd/generate/tenant"
)

// NewCmd returns the generate command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "generate", Short: "Generate the YAML one cluster hands to the other in the manual flow", Args: cobra.NoArgs}
	cmd.AddCommand(tenant.NewCmd(g), identity.NewCmd(g))
	return cmd
}
