// Command liqoctl authenticates Kubernetes clusters to each other.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/liqo-auth/liqo-auth/pkg/cli"
	"github.com/liqo-auth/liqo-auth/pkg/cmd/root"
	"github.com/liqo-auth/liqo-auth/pkg/startup"
)

func main() {
	startup.Done()
	if err := run(); err != nil {
		cli.NewPrinter(os.Stderr, 0).Error(err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	return root.NewCmd(streams).ExecuteContext(ctx)
}
