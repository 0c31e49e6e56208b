// Command liqoctl authenticates Kubernetes clusters to each other.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/liqo-auth/liqo-auth/internal/cli"
	"github.com/liqo-auth/liqo-auth/internal/cmd/root"
	"github.com/liqo-auth/liqo-auth/internal/startup"
)

func main() {
	startup.Done()
	cli.ListingInformers(os.Getenv)
	if code, err := run(); code != 0 {
		if err != nil {
			cli.NewPrinter(os.Stderr, 0).Error(err)
		}
		os.Exit(code)
	}
}

// run executes the command tree under a context that Ctrl-C or SIGTERM cancels, and
// returns the exit code: 130 with "interrupted; re-run to resume" for an interruption,
// whatever error it caused on the way.
func run() (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := root.NewCmd(streams).ExecuteContext(ctx)
	return cli.Exit(ctx.Err() != nil, err)
}
