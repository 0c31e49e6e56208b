package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// ErrInterrupted is what a command interrupted by the user (Ctrl-C, SIGTERM) ends with:
// every step is idempotent, so running the command again resumes where it stopped.
var ErrInterrupted = errors.New("interrupted; re-run to resume")

// ExitInterrupted is the exit code of an interrupted command: 128 + SIGINT, as shells
// and kubectl report it.
const ExitInterrupted = 130

// Exit turns what a command returned into the process's exit code and the error to print
// (nil for none). interrupted is whether the user interrupted the command (the context
// of the signal is done): whatever error the interruption caused (a wait cut short, a
// request cancelled, a raw "context canceled") is then reported as ErrInterrupted, never
// as a timeout.
func Exit(interrupted bool, err error) (int, error) {
	switch {
	case err == nil:
		return 0, nil
	case interrupted || errors.Is(err, ErrInterrupted):
		return ExitInterrupted, ErrInterrupted
	}
	return 1, err
}

// Strict makes every command of the tree refuse what it does not know, as kubectl does:
// a group command (generate, create, completion, ...) run with an unknown subcommand fails
// naming it, with the closest one when there is one, and run alone prints its help on
// stderr and fails, so that a typo such as `liqoctl generate tenants > tenant.yaml` never
// writes help into a file and exits 0; a leaf command that declares no positional
// arguments refuses any. The root alone keeps cobra's behaviour (help on stdout, exit 0).
func Strict(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		strict(c)
	}
}

func strict(c *cobra.Command) {
	if c.HasSubCommands() {
		if !c.Runnable() {
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRunE
			if !strings.Contains(c.Use, " ") {
				c.Use += " COMMAND" // its usage line names what it needs, as kubectl's groups do
			}
		}
		for _, sub := range c.Commands() {
			strict(sub)
		}
		return
	}
	if c.Args == nil && c.Runnable() && !strings.HasPrefix(c.Name(), "__") {
		c.Args = cobra.NoArgs
	}
}

// groupRunE is the RunE of a command that only groups others.
func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return fmt.Errorf("%s needs one of its commands: %s", cmd.CommandPath(), strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %q?", s[0])
	} else {
		msg += ": its commands are " + strings.Join(names, ", ")
	}
	return errors.New(msg)
}
