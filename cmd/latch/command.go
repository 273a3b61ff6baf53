package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/latch-io/latch/client"
)

// A command is one subcommand of latch. Each lives in its own file and
// adds itself with register in an init function, so a new subcommand is
// one new file.
type command struct {
	name    string
	usage   string // arguments after the name, e.g. "[--ephemeral] PATH [DATA]"
	summary string // one line for the command list
	help    string // more about it, for `latch help NAME`; may be ""
	// minArgs and maxArgs bound the positional arguments (maxArgs < 0: no
	// bound).
	minArgs, maxArgs int
	// setup declares the command's flags on fs and returns the function
	// that runs it with the positional arguments.
	setup func(fs *flag.FlagSet) runFunc
	// hidden leaves the command out of the command list (it still has
	// `latch help NAME`): for internal commands other commands start.
	hidden bool
}

type runFunc func(ctx context.Context, e *env, args []string) error

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("latch: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func sortedCommands() []*command {
	list := make([]*command, 0, len(commands))
	for _, c := range commands {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

// errUsage marks a command line that does not parse: its message is
// followed by the command's usage.
var errUsage = errors.New("latch: usage")

// parseInterleaved parses flags anywhere among the positional arguments
// (`latch set /a x --version 3`), which the flag package alone does not: it
// stops at the first positional. "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet returns a flag set for cmd that also accepts the global flags,
// so they may follow the command name too.
func newFlagSet(name string, g *globals, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	g.register(fs)
	return fs
}

// commandUsage prints cmd's usage and flags (its own, then the globals).
func commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: latch %s %s\n\n%s\n", c.name, c.usage, c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	var own, global strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		b := &own
		if isGlobal(f.Name) {
			b = &global
		}
		printFlag(b, f)
	})
	if own.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", own.String())
	}
	fmt.Fprintf(w, "\nGlobal flags:\n%s", global.String())
}

func printFlag(b *strings.Builder, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	dash := "--"
	if len(f.Name) == 1 {
		dash = "-"
	}
	fmt.Fprintf(b, "  %s%s", dash, f.Name)
	if name != "" {
		fmt.Fprintf(b, " %s", name)
	}
	fmt.Fprintf(b, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
		fmt.Fprintf(b, " (default %q)", f.DefValue)
	}
	b.WriteByte('\n')
}

// connected makes the runFunc of a command that talks to the cluster: the
// command is bounded by --timeout and gets the invocation's client.
func connected(run func(ctx context.Context, e *env, c *client.Client, args []string) error) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
		ctx, cancel := e.withTimeout(ctx)
		defer cancel()
		c, err := e.clientFor(ctx, args)
		if err != nil {
			return err
		}
		return run(ctx, e, c, args)
	}
}
