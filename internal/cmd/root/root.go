// Package root builds the liqoctl command tree.
package root

import (
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/authenticate"
	"github.com/liqo-auth/liqo-auth/internal/cmd/create"
	deletecmd "github.com/liqo-auth/liqo-auth/internal/cmd/delete"
	"github.com/liqo-auth/liqo-auth/internal/cmd/generate"
	"github.com/liqo-auth/liqo-auth/internal/cmd/get"
	"github.com/liqo-auth/liqo-auth/internal/cmd/info"
	"github.com/liqo-auth/liqo-auth/internal/cmd/install"
	"github.com/liqo-auth/liqo-auth/internal/cmd/rotate"
	"github.com/liqo-auth/liqo-auth/internal/cmd/tenantstate"
	"github.com/liqo-auth/liqo-auth/internal/cmd/unauthenticate"
	"github.com/liqo-auth/liqo-auth/internal/cmd/uninstall"
	"github.com/liqo-auth/liqo-auth/internal/cmd/verify"
	"github.com/liqo-auth/liqo-auth/internal/cmd/version"
)

// NewCmd returns the liqoctl root command writing to streams.
func NewCmd(streams genericiooptions.IOStreams) *cobra.Command {
	g := &cli.Global{Streams: streams}
	cmd := &cobra.Command{
		Use:   "liqoctl",
		Short: "Authenticate Kubernetes clusters to each other, the Liqo way",
		Long: `liqoctl gives one Kubernetes cluster (the consumer) a narrowly scoped, verifiable identity
on another (the provider), with the Liqo v1 authentication handshake: nonce, signed nonce,
Tenant with a CSR, certificate signed by the provider's Kubernetes CA, Identity, kubeconfig.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			// controller-runtime logs through a process-wide logger, and prints a stack
			// trace when nobody set one: its logs are liqoctl's at -vv, and nowhere else.
			logger := logr.Discard()
			if g.Verbose > 1 {
				logger = zap.New(zap.WriteTo(streams.ErrOut))
			}
			ctrllog.SetLogger(logger)
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	g.AddFlags(cmd)
	cli.RegisterGlobalCompletions(cmd, g)
	cmd.AddCommand(
		install.NewCmd(g),
		uninstall.NewCmd(g),
		authenticate.NewCmd(g),
		unauthenticate.NewCmd(g),
		create.NewCmd(g),
		deletecmd.NewCmd(g),
		get.NewCmd(g),
		generate.NewCmd(g),
		info.NewCmd(g),
		verify.NewCmd(g),
		rotate.NewCmd(g),
		version.NewCmd(g),
	)
	cmd.AddCommand(tenantstate.NewCmds(g)...)
	cmd.AddCommand(tenantstate.NewLimitCmd(g))
	cmd.AddCommand(tenantstate.NewRenewCmd(g))
	cmd.AddCommand(tenantstate.NewApprovalCmds(g)...)
	cli.Strict(cmd)
	return cmd
}
