// Package info is liqoctl info: this cluster's identity, its tenants and identities,
// their certificates, and the next step of any half-done handshake.
package info

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/pkg/cli"
)

// Options of liqoctl info.
type Options struct {
	Global  *cli.Global
	Output  cli.OutputFlags
	Timeout cli.Timeout
}

// NewCmd returns the info command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show this cluster's identity, its tenants and identities, and what to do next",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Output.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Output.AddFlags(cmd, "")
	o.Timeout.AddFlags(cmd)
	return cmd
}

// Run prints the report.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	s, err := o.Global.LocalSide(ctx, "")
	if err != nil {
		return err
	}
	r, err := build(ctx, s, o.Global.Clock())
	if err != nil {
		return err
	}
	out := o.Global.Streams.Out
	if o.Output.Format() != "" {
		return o.Output.PrintData(out, r)
	}
	// The table quotes conditions that others may have written: printed sanitized.
	var b bytes.Buffer
	if err := render(&b, r); err != nil {
		return err
	}
	_, err = io.WriteString(out, cli.Sanitize(b.String()))
	return err
}

func render(out io.Writer, r *Report) error {
	fmt.Fprintf(out, "Cluster ID:  %s\nCluster key: %s\nManager:     %s\n", r.ClusterID, r.KeyFingerprint, r.Manager)
	for _, sec := range []struct {
		title   string
		entries []Entry
	}{{"Tenants (consumers of this cluster)", r.Tenants}, {"Identities (providers this cluster consumes)", r.Identities}} {
		fmt.Fprintf(out, "\n%s:\n", sec.title)
		if len(sec.entries) == 0 {
			fmt.Fprintln(out, "  none")
			continue
		}
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  CLUSTER\tNAMESPACE\tSTATE\tREADY\tEXPIRES\tNEXT")
		for _, e := range sec.entries {
			exp := "-"
			if e.Expires != nil {
				exp = e.Expires.Format(time.RFC3339)
			}
			next := e.Next
			if next == "" {
				next = "-"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%t\t%s\t%s\n", e.Cluster, e.Namespace, e.State, e.Ready, exp, next)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(r.PeeringUsers) > 0 {
		fmt.Fprintf(out, "\nPeering users (credentials handed to consumers' administrators):\n")
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  CLUSTER\tUSER\tEXPIRES")
		for _, u := range r.PeeringUsers {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", u.ConsumerID, u.User, u.NotAfter.UTC().Format(time.RFC3339))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(r.ResourceSlices) > 0 {
		fmt.Fprintf(out, "\nResourceSlices:\n")
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  NAME\tROLE\tCLUSTER\tRESOURCES\tEXPIRES\tSTATE")
		for _, rs := range r.ResourceSlices {
			exp := "-"
			if rs.Expires != nil {
				exp = rs.Expires.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", rs.Name, rs.Role, rs.Cluster, rs.Resources, exp, rs.State)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(r.Certificates) > 0 {
		fmt.Fprintf(out, "\nCertificates issued by this cluster, still valid (Kubernetes cannot revoke them):\n")
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  CLUSTER\tSERIAL\tEXPIRES\tAUTHORIZES")
		for _, c := range r.Certificates {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Cluster, c.Serial, c.Expires.Format(time.RFC3339), c.Authorizes)
		}
		return w.Flush()
	}
	return nil
}
