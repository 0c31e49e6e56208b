// Package delete groups the delete commands.
package delete

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/delete/peeringuser"
	"github.com/liqo-auth/liqo-auth/internal/cmd/delete/resourceslice"
)

// NewCmd returns the delete command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "delete", Short: "Delete what liqoctl created: a peering user, a resource slice", Args: cobra.NoArgs}
	cmd.AddCommand(peeringuser.NewCmd(g), resourceslice.NewCmd(g))
	return cmd
}
