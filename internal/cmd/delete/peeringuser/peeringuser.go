// Package peeringuser is liqoctl delete peering-user: the provider's administrator removes
// the peering user of a consumer and proves it authorizes nothing any more.
package peeringuser

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl delete peering-user.
type Options struct {
	Global            *cli.Global
	ConsumerClusterID string
	Timeout           cli.Timeout
}

// NewCmd returns the delete peering-user command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "peering-user",
		Aliases: []string{"peering-users", "peeringuser"},
		Short:   "Remove the peering user of a consumer and prove it authorizes nothing (provider)",
		Long: `On the provider: remove the roles and bindings of the peering user of a consumer, then
prove with SubjectAccessReviews and a scan of every binding that its certificate authorizes
nothing any more. Kubernetes cannot revoke the certificate itself: it stays
cryptographically valid until it expires, and a later peering user, whose name is
another, never revives it. The consumer keeps the identity it authenticated with.`,
		Example: `  liqoctl delete peering-user --consumer-cluster-id cl-consumer`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.ValidateClusterIDFlag("--consumer-cluster-id", o.ConsumerClusterID); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cli.AddClusterIDFlag(cmd, g, &o.ConsumerClusterID, "consumer-cluster-id", "consumer")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Run deletes the peering user.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	if checkKnownPeerErr := handshake.CheckKnownPeer(ctx, s, o.ConsumerClusterID, "--consumer-cluster-id"); checkKnownPeerErr != nil {
		return checkKnownPeerErr
	}
	_, err = handshake.DeletePeeringUser(ctx, s, o.ConsumerClusterID)
	return err
}
