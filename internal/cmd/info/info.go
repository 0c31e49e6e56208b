// Package info is liqoctl info: this cluster's identity, its tenants and identities,
// their certificates, and the next step of any half-done handshake.
package info

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
	"github.com/liqo-auth/liqo-auth/pkg/rotation"
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
	o.Output.AddDataFlags(cmd, "")
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
	return printReport(o.Global.Streams.Out, r, &o.Output)
}

// printReport writes the report as data (-o) or as the sanitized table.
func printReport(out io.Writer, r *Report, output *cli.OutputFlags) error {
	return cli.PrintReport(out, r, output, render)
}

func render(out io.Writer, r *Report) error {
	fmt.Fprintf(out, "Cluster ID:  %s\nCluster key: %s\nCluster CA:  %s (consumers reach %s)\nManager:     %s\n", r.ClusterID, r.KeyFingerprint, or(r.CAFingerprint, "-"), r.APIServer, r.Manager.detail)
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
		fmt.Fprintln(w, "  CLUSTER\tNAMESPACE\tSTATE\tREADY\tEXPIRES\tRENEWED\tREFUSED\tNEXT")
		for _, e := range sec.entries {
			refused := "-"
			if e.LastRefusal != nil {
				refused = e.LastRefusal.Reason + " " + e.LastRefusal.Time.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n", e.Cluster, e.Namespace, e.State, e.Ready, orDash(e.Expires), orDash(e.LastRenewal), refused, or(e.next, "-"))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if err := renderApprovals(out, r.Approvals); err != nil {
		return err
	}
	if err := renderKeyRotation(out, r.KeyRotation); err != nil {
		return err
	}
	if err := renderPeeringUsers(out, r.PeeringUsers); err != nil {
		return err
	}
	if len(r.ResourceSlices) > 0 {
		fmt.Fprintf(out, "\nResourceSlices:\n")
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  NAME\tROLE\tCLUSTER\tRESOURCES\tEXPIRES\tSTATE")
		for _, rs := range r.ResourceSlices {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", rs.Name, rs.Role, rs.Cluster, rs.Resources, orDash(rs.Expires), or(rs.decision, rs.State))
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
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Cluster, c.Serial, c.Expires.Format(time.RFC3339), c.words)
		}
		return w.Flush()
	}
	return nil
}

// renderPeeringUsers writes the peering users handed out, if any.
func renderPeeringUsers(out io.Writer, users []handshake.PeeringUser) error {
	if len(users) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nPeering users (credentials handed to consumers' administrators):\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tUSER\tEXPIRES\tSTATE")
	for _, u := range users {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", u.ConsumerID, u.User, u.NotAfter.UTC().Format(time.RFC3339), peeringUserState(u))
	}
	return w.Flush()
}

// renderKeyRotation writes the key rotation under way, if any: its phase and each peer.
func renderKeyRotation(out io.Writer, st *rotation.Status) error {
	if st == nil {
		return nil
	}
	fmt.Fprintf(out, "\nKey rotation: %s (liqoctl rotate key resumes it)\n", st.Phase)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  PROVIDER\tSTATE\tREASON\tRUN")
	for _, p := range st.Peers {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", p.Peer, p.State, or(p.Reason, "-"), or(p.Run, "-"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.SlicesOnPrevious) > 0 {
		fmt.Fprintf(out, "  slice identities still on the previous key: %s\n", strings.Join(st.SlicesOnPrevious, ", "))
	}
	if len(st.TenantsOnPrevious) > 0 {
		fmt.Fprintf(out, "  Tenants still sealed with the previous key: %s\n", strings.Join(st.TenantsOnPrevious, ", "))
	}
	return nil
}

// renderApprovals writes the consumers that wait for approval or were denied, if any.
func renderApprovals(out io.Writer, approvals []Approval) error {
	if len(approvals) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nApprovals (consumers waiting for this cluster's administrator: liqoctl approve tenant, deny tenant):\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tNAMESPACE\tSTATE\tKEY\tSINCE\tREASON")
	for _, a := range approvals {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", a.Cluster, a.Namespace, a.State, a.KeyFingerprint, orDash(a.Since), or(a.Reason, "-"))
	}
	return w.Flush()
}

// orDash is a time in RFC 3339, or "-".
func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// or is s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// peeringUserState says whether a peering user retired (it authorizes nothing: its
// consumer's Identity was ready and it retired itself, or its grants were removed).
func peeringUserState(u handshake.PeeringUser) string {
	if u.Retired {
		return "retired (authorizes nothing)"
	}
	return "-"
}
