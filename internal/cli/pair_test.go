package cli

import (
	"bytes"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestNewPairOnePrinter (helper-13's review of d4b4c84): NewPair builds both sides at
// once, and both print through the one printer of the command, made before either starts:
// Global.Printer makes it on first use, without a lock, and authenticate and unauthenticate
// call NewPair before anything else asks for it. Under go test -race, two goroutines making
// it fail this test; without -race, both sides' printers must be the command's.
func TestNewPairOnePrinter(t *testing.T) {
	for range 20 {
		var b bytes.Buffer
		g := &Global{Streams: genericiooptions.IOStreams{ErrOut: &b, Out: &b}}
		fs := pflag.NewFlagSet("liqoctl", pflag.ContinueOnError)
		g.Local.AddFlags(fs, "", "local")
		remote := &ClusterFlags{}
		remote.AddFlags(fs, "remote-", "remote")
		if err := fs.Parse([]string{"--kubeconfig", "/nonexistent/local", "--remote-kubeconfig", "/nonexistent/remote"}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewPair(g, remote); err == nil {
			t.Fatal("NewPair with kubeconfigs that do not exist: no error")
		}
		if g.printer == nil {
			t.Fatal("NewPair made no printer before building the sides")
		}
	}
}
