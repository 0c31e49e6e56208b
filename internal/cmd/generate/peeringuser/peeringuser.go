// Package peeringuser is liqoctl generate peering-user: the provider's administrator
// issues, for one consumer, a kubeconfig with only the permissions that consumer's
// administrator needs to run liqoctl authenticate and unauthenticate against this cluster.
package peeringuser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/authn"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl generate peering-user.
type Options struct {
	Global            *cli.Global
	ConsumerClusterID string
	TTL               time.Duration
	Output            string
	Timeout           cli.Timeout
}

// NewCmd returns the generate peering-user command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:     "peering-user",
		Aliases: []string{"peering-users", "peeringuser"},
		Short:   "Print a kubeconfig with which a consumer's administrator authenticates to this cluster (provider)",
		Long: `On the provider: issue a peering user for one consumer and print its kubeconfig. The
consumer's administrator, who holds no credential of this cluster, then runs liqoctl
authenticate (and later unauthenticate) with it as --remote-kubeconfig.

The peering user has a fresh key (never the cluster key), a certificate issued by this
cluster's client signer for the unique user liqo-peer-user-<consumer>-<random>, valid for
--ttl, and exactly the permissions that handshake needs: the nonce and the consumer's
Tenant in its tenant namespace, reading by name the cluster ID, the manager's Lease, the
consumer's tenant record and two namespaces. No other Secret (an admission policy refuses
it), no CertificateSigningRequest, nothing in any other namespace. The provider's
liqo-auth-manager must run: a peering user cannot run the provider's controllers.

One live peering user per consumer: liqoctl delete peering-user removes it and proves it
authorizes nothing any more.`,
		Example: `  liqoctl generate peering-user --consumer-cluster-id cl-consumer > peering-user.kubeconfig`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	cli.AddClusterIDFlag(cmd, g, &o.ConsumerClusterID, "consumer-cluster-id", "consumer")
	f.DurationVar(&o.TTL, "ttl", handshake.DefaultPeeringUserTTL, fmt.Sprintf("lifetime of the peering user's certificate (at least 10m, at most %s)", handshake.MaxPeeringUserTTL))
	f.StringVarP(&o.Output, "output", "o", "kubeconfig", "output format: kubeconfig or yaml (the same YAML kubeconfig), or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"kubeconfig", "yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if err := cli.ValidateClusterIDFlag("--consumer-cluster-id", o.ConsumerClusterID); err != nil {
		return err
	}
	if o.TTL < 10*time.Minute || o.TTL > handshake.MaxPeeringUserTTL {
		return fmt.Errorf("--ttl must be between 10m (the shortest certificate the CertificateSigningRequest API issues) and %s, not %s", handshake.MaxPeeringUserTTL, o.TTL)
	}
	switch o.Output {
	case "kubeconfig", "yaml", "json":
	default:
		return fmt.Errorf("--output must be kubeconfig, yaml or json, not %q", o.Output)
	}
	return nil
}

// Run issues the peering user and prints its kubeconfig.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	if s.ClusterID == o.ConsumerClusterID {
		return fmt.Errorf("--consumer-cluster-id %q is this cluster's own ID: give the consumer's", o.ConsumerClusterID)
	}
	pu, err := handshake.GeneratePeeringUser(ctx, s, o.ConsumerClusterID, o.TTL, o.Global.Clock())
	if err != nil {
		return err
	}
	info, err := authn.ReadKubeconfig(pu.Kubeconfig)
	if err != nil {
		return err
	}
	fp, err := authn.CAFingerprint(info.CA)
	if err != nil {
		return err
	}
	s.Report.Info("Peering user %s for cluster %q, certificate %s valid until %s", pu.User, pu.ConsumerID, pu.Serial, pu.NotAfter.UTC().Format(time.RFC3339))
	s.Report.Info("It reaches %s, whose CA fingerprint is %s", info.Server, fp)
	s.Report.Info("Next, on the consumer: liqoctl authenticate --remote-kubeconfig <this kubeconfig>")
	out := pu.Kubeconfig
	if o.Output == "json" {
		var buf bytes.Buffer
		raw, yamlErr := yaml.YAMLToJSON(pu.Kubeconfig)
		if yamlErr == nil {
			yamlErr = json.Indent(&buf, raw, "", "    ")
		}
		if yamlErr != nil {
			return yamlErr
		}
		out = append(buf.Bytes(), '\n')
	}
	_, err = o.Global.Streams.Out.Write(out)
	return err
}
