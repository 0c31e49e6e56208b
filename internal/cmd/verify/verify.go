// Package verify is liqoctl verify: it proves, from the consumer's side, that each
// identity it holds on a provider works and is exactly what it should be.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/pkg/authmanager"
	"github.com/liqo-auth/liqo-auth/pkg/handshake"
)

// Options of liqoctl verify.
type Options struct {
	Global          *cli.Global
	Remote          cli.ClusterFlags
	RemoteClusterID string
	Output          cli.OutputFlags
	Timeout         cli.Timeout
	// MaxClockSkew is the largest difference between the clusters' clocks that passes.
	MaxClockSkew time.Duration
}

// NewCmd returns the verify command.
func NewCmd(g *cli.Global) *cobra.Command {
	o := &Options{Global: g}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Prove that this cluster's identities on its providers work and hold exactly what they should",
		Long: `Check, for each provider this cluster holds a control-plane identity on (or only
--remote-cluster-id), that the identity reaches the provider and authenticates as this
cluster, that its permissions there (SelfSubjectRulesReview) are exactly those the tenant
role grants, that its certificate is for this cluster's key, chains to the CA pinned for
that provider and is not expired (with its expiry and next renewal), that its kubeconfig
Secret exists and holds that certificate, and that the two clusters' clocks agree.
Identities are read only in the tenant namespaces this cluster designated.

With --remote-kubeconfig (the provider's credentials), it also checks that nothing grants
the identity anything in any other namespace (every-namespace: the provider's bindings
and SubjectAccessReviews; the identity alone cannot see other namespaces), and the other
direction when the provider is also a consumer of this cluster. Exits non-zero naming
each failure.`,
		Example: `  liqoctl verify --kubeconfig consumer.kubeconfig
  liqoctl verify --kubeconfig consumer.kubeconfig --remote-cluster-id cl-provider -o json
  liqoctl verify --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Output.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Remote.AddFlags(cmd.Flags(), "remote-", "remote (provider)")
	cmd.Flags().StringVar(&o.RemoteClusterID, "remote-cluster-id", "", "verify only the identity on this provider")
	_ = cmd.RegisterFlagCompletionFunc("remote-cluster-id", cli.RemoteClusterIDCompletion(g))
	cmd.Flags().DurationVar(&o.MaxClockSkew, "max-clock-skew", 30*time.Second, "largest difference between the clusters' clocks that passes")
	o.Output.AddDataFlags(cmd, "")
	o.Timeout.AddFlags(cmd)
	cli.RegisterClusterCompletions(cmd, &o.Remote, "remote-")
	return cmd
}

// Run checks each direction and prints the report; it fails naming every failed check.
func (o *Options) Run(ctx context.Context) error {
	ctx, cancel := o.Timeout.Context(ctx)
	defer cancel()
	local, err := o.Global.LocalSide(ctx, handshake.Local)
	if err != nil {
		return err
	}
	remote, err := o.remoteSide(ctx, local)
	if err != nil {
		return err
	}
	warnStale(ctx, local, o.Global.Clock())
	if remote != nil {
		warnStale(ctx, remote, o.Global.Clock())
	}
	v := verifier{now: o.Global.Clock, maxSkew: o.MaxClockSkew}
	r := &Report{Peers: []Peer{}}
	var providers []string
	switch {
	case o.RemoteClusterID != "":
		providers = []string{o.RemoteClusterID}
	case remote != nil:
		providers = []string{remote.ClusterID}
	default:
		var ignored int
		if providers, ignored, err = v.providers(ctx, local); err != nil {
			return err
		}
		warnIgnored(local, ignored)
	}
	for _, p := range providers {
		r.Peers = append(r.Peers, v.verify(ctx, local, p, remote))
	}
	if remote != nil {
		// The other direction, when the remote cluster is also a consumer of this one.
		if back, _, err := v.providers(ctx, remote); err == nil && slices.Contains(back, local.ClusterID) {
			r.Peers = append(r.Peers, v.verify(ctx, remote, local.ClusterID, local))
		}
	}
	if len(r.Peers) == 0 {
		return errors.New("this cluster holds no identity on any provider: nothing to verify (liqoctl authenticate first)")
	}
	if err := printReport(o.Global.Streams.Out, r, &o.Output); err != nil {
		return err
	}
	return r.Err()
}

// remoteSide is the provider reached with --remote-kubeconfig, identified; nil without it.
func (o *Options) remoteSide(ctx context.Context, local *handshake.Side) (*handshake.Side, error) {
	if o.Remote.RequireRemote() != nil {
		return nil, nil //nolint:nilerr // without --remote-kubeconfig there is no remote side: not an error
	}
	remote, err := o.Remote.Side(handshake.Remote, o.Global.Printer().Scoped(handshake.Remote))
	if err != nil {
		return nil, err
	}
	if err := (&handshake.Pair{Consumer: local, Provider: remote}).Identify(ctx); err != nil {
		return nil, err
	}
	if o.RemoteClusterID != "" && o.RemoteClusterID != remote.ClusterID {
		return nil, fmt.Errorf("--remote-cluster-id %q is not the cluster the remote kubeconfig reaches (%q)", o.RemoteClusterID, remote.ClusterID)
	}
	return remote, nil
}

// printReport writes the report as data (-o) or as the sanitized table.
func printReport(out io.Writer, r *Report, output *cli.OutputFlags) error {
	return cli.PrintReport(out, r, output, render)
}

// warnStale says when a side's manager stopped renewing its Lease, and since when:
// verify's checks may pass for a while after that, until a certificate is due.
func warnStale(ctx context.Context, s *handshake.Side, now time.Time) {
	if holder, since, err := authmanager.StaleLease(ctx, s.Client, s.Namespace, now); err == nil && since != nil {
		s.Report.Warn("%s", authmanager.DescribeStale(s.Namespace, holder, *since, now))
	}
}

// warnIgnored says, in one line, that Identities outside the designated tenant namespaces
// were not verified.
func warnIgnored(s *handshake.Side, n int) {
	if n > 0 {
		s.Report.Warn("%d Identities outside the tenant namespaces this cluster designated were ignored (whoever may write Identities in another namespace can create them; only the tenant records decide)", n)
	}
}

// render prints one line per check.
func render(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tPROVIDER\tCHECK\tRESULT\tDETAIL")
	for _, p := range r.Peers {
		for _, c := range p.Checks {
			detail := c.Detail
			if c.summary != "" {
				detail = c.summary
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Consumer, p.Provider, c.Name, c.Result, oneLine(detail))
		}
	}
	return tw.Flush()
}

// oneLine keeps a table cell on its line: a detail may quote the other cluster's
// multi-line error.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Err names every failed check, nil when all passed.
func (r *Report) Err() error {
	var failed []string
	for _, p := range r.Peers {
		for _, c := range p.Checks {
			if c.Result == ResultFail {
				failed = append(failed, fmt.Sprintf("%s on %s: %s (%s)", p.Consumer, p.Provider, c.Name, c.Detail))
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("verification failed: %s", strings.Join(failed, "; "))
}
