// Package nonce is liqoctl get nonce: print the nonce a provider holds for a consumer.
package nonce

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl get nonce.
type Options struct {
	Global          *cli.Global
	RemoteClusterID string
	Timeout         cli.Timeout
}

// NewCmd returns the get nonce command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "nonce",
		Aliases: []string{"nonces"},
		Short:   "Print the nonce held for a consumer, bare on stdout (provider)",
		Example: `  liqoctl get nonce --remote-cluster-id cl-consumer > nonce.txt`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "consumer")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Run prints the nonce.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	nonce, issued, err := handshake.GetNonce(ctx, s, o.RemoteClusterID)
	if err != nil {
		return err
	}
	cfg, err := cluster.GetConfig(ctx, s.Client, s.Namespace)
	if err != nil {
		return s.Explain(err, "reading the nonce TTL")
	}
	expires := issued.Add(cfg.NonceTTLOrDefault())
	if left := expires.Sub(o.Global.Clock()); left <= 0 {
		return fmt.Errorf("the nonce for cluster %q expired at %s (TTL %s): run liqoctl create nonce --remote-cluster-id %s to replace it",
			o.RemoteClusterID, expires.UTC().Format(time.RFC3339), cfg.NonceTTLOrDefault(), o.RemoteClusterID)
	} else if left < handshake.NonceReuseWindow {
		s.Report.Warn("This nonce expires in %s (at %s): liqoctl create nonce replaces it", left.Round(time.Second), expires.UTC().Format(time.RFC3339))
	}
	_, err = fmt.Fprintln(o.Global.Streams.Out, nonce)
	return err
}
