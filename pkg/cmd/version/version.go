// Package version is liqoctl version.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/version"
)

// NewCmd returns the version command. It touches no cluster.
func NewCmd(g *cli.Global) *cobra.Command {
	var output cli.OutputFlags
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of liqoctl",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := output.Validate(); err != nil {
				return err
			}
			info := version.Get()
			if output.Format() == "" {
				_, err := fmt.Fprintln(g.Streams.Out, "liqoctl", info)
				return err
			}
			return output.PrintData(g.Streams.Out, info)
		},
	}
	output.AddFlags(cmd, "")
	return cmd
}
