// Package version is liqoctl version.
package version

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/version"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
)

// Versions is what liqoctl version prints: its own, and that of the liqo-auth-manager of
// the cluster its flags select, when one runs there.
type Versions struct {
	Client  version.Info    `json:"client"`
	Cluster string          `json:"cluster,omitempty"`
	Manager *ManagerVersion `json:"manager,omitempty"`
}

// ManagerVersion is the running liqo-auth-manager of a cluster.
type ManagerVersion struct {
	Version string `json:"version"`
	Holder  string `json:"holder"`
}

// Options are the options of liqoctl version.
type Options struct {
	Global *cli.Global
	Output cli.OutputFlags
	// Client prints only liqoctl's own version, touching no cluster.
	Client bool
}

// NewCmd returns the version command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of liqoctl, and of the cluster's liqo-auth-manager",
		Long: `Print the version of liqoctl and, unless --client, the version of the liqo-auth-manager
running in the cluster the connection flags select, with a warning when they differ.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Output.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Client, "client", false, "print only liqoctl's version, without reaching any cluster")
	o.Output.AddDataFlags(cmd, "")
	return cmd
}

// Run prints the versions. A cluster that cannot be reached is a warning, not a failure:
// liqoctl's own version is always printed.
func (o *Options) Run(ctx context.Context) error {
	v := Versions{Client: version.Get()}
	if !o.Client {
		o.managerVersion(ctx, &v)
	}
	out := o.Global.Streams.Out
	if o.Output.Format() != "" {
		return o.Output.PrintData(out, v)
	}
	fmt.Fprintln(out, "liqoctl", v.Client)
	switch {
	case v.Manager != nil:
		fmt.Fprintf(out, "liqo-auth-manager %s (cluster %s, %s)\n", v.Manager.Version, v.Cluster, v.Manager.Holder)
	case v.Cluster != "":
		fmt.Fprintf(out, "liqo-auth-manager: none runs in cluster %s\n", v.Cluster)
	}
	return nil
}

func (o *Options) managerVersion(ctx context.Context, v *Versions) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p := o.Global.Printer()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		p.Warn("The version of liqo-auth-manager is unknown: %v (--client prints liqoctl's only)", err)
		return
	}
	v.Cluster = s.ClusterID
	running, err := authmanager.RunningManager(ctx, s.Client, s.Namespace, o.Global.Clock())
	if err != nil {
		p.Warn("The version of liqo-auth-manager is unknown: %v", s.Explain(err, "reading its Lease"))
		return
	}
	if running == nil {
		return
	}
	v.Manager = &ManagerVersion{Version: running.Version, Holder: running.Holder}
	if skew := authmanager.VersionSkew(version.Get().Version, running.Version); skew != "" {
		p.Warn("%s", skew)
	}
}
