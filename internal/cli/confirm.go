package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// ErrNotConfirmed is returned when the user answers anything but yes.
var ErrNotConfirmed = errors.New("not confirmed: nothing was changed")

// Confirm asks the user, on the terminal of the command's streams, whether to go on with
// what question describes, as Liqo's liqoctl does before it destroys something. skip
// (--skip-confirm) goes on without asking; without it, a stdin that is not a terminal
// (a script, a pipe) is refused rather than taken for a yes.
func (g *Global) Confirm(skip bool, question string) error {
	if skip {
		return nil
	}
	f, ok := g.Streams.In.(*os.File)
	return confirm(g.Streams.In, g.Streams.ErrOut, ok && term.IsTerminal(int(f.Fd())), question)
}

func confirm(in io.Reader, out io.Writer, interactive bool, question string) error {
	if !interactive {
		return fmt.Errorf("%s\nstdin is not a terminal, so liqoctl cannot ask: pass --skip-confirm to go ahead", question)
	}
	fmt.Fprintf(out, "%s\nGo ahead? [y/N]: ", question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return ErrNotConfirmed
}
