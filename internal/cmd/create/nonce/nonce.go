// Package nonce is liqoctl create nonce: the provider's first step of the manual flow.
package nonce

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/apis/authentication/wire"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/cluster"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl create nonce.
type Options struct {
	Global          *cli.Global
	RemoteClusterID string
	Output          cli.OutputFlags
	Timeout         cli.Timeout
}

// NewCmd returns the create nonce command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "nonce",
		Aliases: []string{"nonces"},
		Short:   "Create the tenant namespace of a consumer and a nonce for it to sign (provider)",
		Long: `On the provider: ensure the tenant namespace of the consumer and a fresh nonce in it.
The nonce is printed on stderr; hand it to the consumer's administrator (liqoctl get nonce
prints it bare on stdout). A young unused nonce is kept: re-running changes nothing.`,
		Example: `  liqoctl create nonce --remote-cluster-id cl-consumer
  liqoctl create nonce --remote-cluster-id cl-consumer -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cli.AddRemoteClusterIDFlag(cmd, g, &o.RemoteClusterID, "consumer")
	o.Output.AddFlags(cmd, "")
	o.Timeout.AddFlags(cmd)
	o.Global.AddAdoptFlag(cmd)
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := cli.ValidateRemoteClusterID(o.RemoteClusterID); err != nil {
		return err
	}
	return o.Output.Validate()
}

// Run creates the nonce.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, tn, err := o.Global.LocalTenantNamespace(ctx, o.RemoteClusterID, "consumer")
	if err != nil {
		return err
	}
	now := o.Global.Clock()
	n, err := handshake.EnsureNonce(ctx, s, tn, o.RemoteClusterID, now)
	if err != nil {
		return err
	}
	cfg, err := cluster.GetConfig(ctx, s.Client, s.Namespace)
	if err != nil {
		return s.Explain(err, "reading the nonce TTL")
	}
	ttl := cfg.NonceTTLOrDefault()
	expires := n.CreatedAt.Add(ttl).UTC().Format(time.RFC3339)
	if n.Created {
		s.Report.Info("Nonce created in namespace %s: it expires at %s (TTL %s)", tn, expires, ttl)
	} else {
		s.Report.Info("Nonce kept: the one in namespace %s was created %s ago and expires at %s (TTL %s)", tn, now.Sub(n.CreatedAt).Round(time.Second), expires, ttl)
	}
	s.Report.Info("Nonce retrieved: %s", n.Value)
	// The consumer pins the CA it will be handed before any Identity exists: say it now.
	server, ca, err := handshake.AdvertisedServer(ctx, s)
	if err != nil {
		return err
	}
	caFP, err := authn.CAFingerprint(ca)
	if err != nil {
		return fmt.Errorf("the CA of %s handed to consumers is not valid: %w", server, err)
	}
	s.Report.Info("Consumers reach %s, whose CA fingerprint is %s", server, caFP)
	// The consumer pins its tenant namespace here too: named always, the protocol's
	// included, as the consumer's refusals ask for it by this line (a consumer with a
	// peering older than the pin, or the manager's guess of one, takes only this word).
	s.Report.Info("Next, on the consumer, before %s: liqoctl generate tenant --remote-cluster-id %s --nonce <nonce> --expect-fingerprint %s --remote-tenant-namespace %s", expires, s.ClusterID, caFP, tn)
	if o.Output.Format() == "" {
		return nil
	}
	var secret corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: tn, Name: wire.NonceSecretName}, &secret); err != nil {
		return s.Explain(err, "reading the nonce")
	}
	return o.Output.PrintObjects(o.Global.Streams.Out, &secret)
}
