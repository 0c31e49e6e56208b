// Command docgen writes the liqoctl reference (Markdown, one page per command) and the
// shell completion scripts, both generated from the command tree.
//
//	docgen docs DIR
//	docgen completions DIR
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/liqo-auth/liqo-auth/internal/cmd/root"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: docgen docs|completions DIR")
	}
	dir := args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := root.NewCmd(genericiooptions.NewTestIOStreamsDiscard())
	cmd.DisableAutoGenTag = true
	cmd.InitDefaultCompletionCmd()
	switch args[0] {
	case "docs":
		old, _ := filepath.Glob(filepath.Join(dir, "liqoctl*.md"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
		return doc.GenMarkdownTree(cmd, dir)
	case "completions":
		return completions(cmd, dir)
	}
	return fmt.Errorf("unknown target %q", args[0])
}

func completions(cmd *cobra.Command, dir string) error {
	gens := map[string]func(*bytes.Buffer) error{
		"liqoctl.bash": func(b *bytes.Buffer) error { return cmd.GenBashCompletionV2(b, true) },
		"liqoctl.zsh":  func(b *bytes.Buffer) error { return cmd.GenZshCompletion(b) },
		"liqoctl.fish": func(b *bytes.Buffer) error { return cmd.GenFishCompletion(b, true) },
		"liqoctl.ps1":  func(b *bytes.Buffer) error { return cmd.GenPowerShellCompletionWithDesc(b) },
	}
	for name, gen := range gens {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
