// Package create groups the create commands.
package create

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/create/nonce"
	"github.com/liqo-auth/liqo-auth/internal/cmd/create/resourceslice"
)

// NewCmd returns the create command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Create handshake objects on the local cluster", Args: cobra.NoArgs}
	cmd.AddCommand(nonce.NewCmd(g), resourceslice.NewCmd(g))
	return cmd
}
