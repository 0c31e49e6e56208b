// Package get groups the get commands.
package get

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/get/nonce"
)

// NewCmd returns the get command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "get", Short: "Read handshake objects from the local cluster", Args: cobra.NoArgs}
	cmd.AddCommand(nonce.NewCmd(g))
	return cmd
}
