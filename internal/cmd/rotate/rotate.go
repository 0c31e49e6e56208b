// Package rotate groups the rotate commands.
package rotate

import (
	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/rotate/key"
)

// NewCmd returns the rotate command group.
func NewCmd(g *cli.Global) *cobra.Command {
	cmd := &cobra.Command{Use: "rotate", Short: "Rotate this cluster's credentials", Args: cobra.NoArgs}
	cmd.AddCommand(key.NewCmd(g))
	return cmd
}
