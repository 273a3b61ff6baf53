// Command latch is the command-line client of a latch cluster: namespace
// operations, watches, sessions, members, cluster settings (limits) and
// status; locks (lock, locks)
// and elections (elect); benchmarks against a running cluster (bench); and
// the chaos runner that proves a cluster safe under faults (chaos).
//
//	latch create /demo hello && latch get /demo
//	latch watch --recursive /demo
//	latch --endpoints 10.0.0.1:7420,10.0.0.2:7420 status
//
// Run next to `latchd --dev` it needs no flags: it connects to
// 127.0.0.1:7420, trusts the CA in ./latch-data/tls and presents a client
// certificate of its own (identity dev-<OS user>, issued with that dev
// CA); see dev.go. Errors print one
// line naming the error (`latch: no node: /x`) and exit with status 1.
//
// Decisions:
//   - Each command is one file that registers itself (command.go): adding a
//     subcommand touches nothing else.
//   - Global flags may come before or after the command, and a command's
//     flags before or after its arguments (`latch set /a x --version 3`);
//     "--" ends flags.
//   - Every error exits 1, usage errors included; `latch help [COMMAND]`
//     and -h exit 0.
//   - Each invocation is one client with one session, closed on exit: a node
//     made with `create --ephemeral` lives only as long as the command.
//   - --timeout bounds the whole command, except watch, which it bounds
//     only until the watch is established (lock and elect say in their
//     help what it bounds for them).
//   - --cells FILE routes each command to the cell of its first path
//     argument (one client per cell used, client.Cells); status shows
//     every cell; a command without a path is refused.
//   - -o json prints one JSON document per result (per event for watch);
//     node data is a string when it is UTF-8, else base64 in data_base64.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/session"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every command takes.
type globals struct {
	endpoints  string
	ca         string
	cert       string
	key        string
	sessionTTL time.Duration
	output     string
	timeout    time.Duration
	admin      string
	cells      string
}

var globalNames = map[string]bool{
	"endpoints": true, "ca": true, "cert": true, "key": true, "session-ttl": true, "o": true, "timeout": true, "admin": true, "cells": true,
}

func isGlobal(name string) bool { return globalNames[name] }

func defaultGlobals() globals {
	return globals{
		endpoints:  client.DefaultEndpoint,
		sessionTTL: 10 * time.Second,
		output:     "text",
		timeout:    10 * time.Second,
	}
}

// register declares the global flags on fs, defaulting to g's current
// values (so flags given before the command survive a command's own flag
// set).
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "endpoints", g.endpoints, "comma-separated client addresses (host:port) of cluster members; any member will do")
	fs.StringVar(&g.ca, "ca", g.ca, "CA certificate (PEM) that signed the servers' certificates\n(default: dev discovery: ./"+devTLSDir+"/ca.pem and a dev client certificate of\nits own when present, else the system roots)")
	fs.StringVar(&g.cert, "cert", g.cert, "client certificate (PEM) for mutual TLS")
	fs.StringVar(&g.key, "key", g.key, "private key (PEM) of --cert")
	fs.DurationVar(&g.sessionTTL, "session-ttl", g.sessionTTL, "TTL of the command's session (ephemeral nodes live as long as it)")
	fs.StringVar(&g.output, "o", g.output, "output format: text or json")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long a command may take (for watch: to connect and start watching)")
	fs.StringVar(&g.cells, "cells", g.cells, "cell map file ({\"cells\": {\"a\": [\"host:7420\", ...], ...}}): each command goes to the cell of its path's first component\n(status shows every cell; --endpoints is not used)")
	fs.StringVar(&g.admin, "admin", g.admin, "admin HTTP address (host:port or https://host:port) of a member, for member, snapshot, limits and bench\n(default: the addresses the members publish)")
}

func (g *globals) validate() error {
	switch g.output {
	case "text", "json":
	default:
		return fmt.Errorf("%w: -o %q: want text or json", errUsage, g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("%w: --timeout %v must be positive", errUsage, g.timeout)
	}
	if (g.cert == "") != (g.key == "") {
		return fmt.Errorf("%w: --cert and --key go together", errUsage)
	}
	return nil
}

func (g *globals) config() (client.Config, error) {
	cfg := client.Config{SessionTTL: g.sessionTTL, ClientName: "latch-cli"}
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	// --stale reads and watches are answered by the member asked (the
	// first endpoint that answers), not by one the client picks.
	cfg.ReadEndpoints = cfg.Endpoints
	if g.ca != "" || g.cert != "" {
		tlsConf, err := session.ClientTLS(g.ca, g.cert, g.key)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tlsConf
	} else {
		tlsConf, err := devTLS(devTLSDir)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = tlsConf
	}
	return cfg, cfg.Validate()
}

// env is what a command runs with.
type env struct {
	g      *globals
	stdout io.Writer
	stderr io.Writer
	c      *client.Client
	x      *client.Cells // with --cells
}

// cellsClient opens the --cells client on first use.
func (e *env) cellsClient(ctx context.Context) (*client.Cells, error) {
	if e.x != nil {
		return e.x, nil
	}
	m, err := client.ReadCellMapFile(e.g.cells)
	if err != nil {
		return nil, fmt.Errorf("%w: --cells: %v", errUsage, err)
	}
	cfg, err := e.g.config()
	if err != nil {
		return nil, err
	}
	x, err := client.DialCells(ctx, client.CellsConfig{Config: cfg, Map: m})
	if err != nil {
		return nil, err
	}
	e.x = x
	return x, nil
}

// clientFor returns the client a command on args uses: with --cells the
// client of the cell of its first path argument, else the one client.
func (e *env) clientFor(ctx context.Context, args []string) (*client.Client, error) {
	if e.g.cells == "" {
		return e.client(ctx)
	}
	x, err := e.cellsClient(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range args {
		if strings.HasPrefix(a, "/") {
			c, err := x.Client(ctx, a)
			if err != nil {
				return nil, e.g.hint(err)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: with --cells a command goes to the cell of its path, and this one names no path: use --endpoints of one cell instead", errUsage)
}

// client connects on first use, bounded by ctx.
func (e *env) client(ctx context.Context) (*client.Client, error) {
	if e.c != nil {
		return e.c, nil
	}
	cfg, err := e.g.config()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		return nil, e.g.hint(err)
	}
	e.c = c
	return c, nil
}

// hint adds what to do to an error no retry fixes: which CA file was
// trusted and the flag to change it, or the flags of a client
// certificate.
func (g *globals) hint(err error) error {
	switch {
	case errors.Is(err, client.ErrUntrusted):
		ca := g.ca
		if ca == "" {
			ca = filepath.Join(devTLSDir, "ca.pem")
			if _, serr := os.Stat(ca); serr != nil {
				return fmt.Errorf("%w; hint: no --ca given and no %s here, so only the system's CAs were trusted: pass --ca FILE, the CA that signed the servers' certificates", err, ca)
			}
			ca += " (the dev CA found in this directory)"
		}
		return fmt.Errorf("%w; hint: the CA trusted was %s, which did not sign this server's certificate: pass --ca FILE with the CA that did", err, ca)
	case errors.Is(err, client.ErrCertRequired):
		if g.cert == "" {
			return fmt.Errorf("%w; hint: the server wants a client certificate: pass --cert FILE and --key FILE", err)
		}
		return fmt.Errorf("%w; hint: the server did not accept --cert %s: use one signed by the CA it trusts (its --tls-client-ca)", err, g.cert)
	}
	return err
}

func (e *env) close() {
	if e.c != nil {
		e.c.Close()
	}
	if e.x != nil {
		e.x.Close()
	}
}

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	g := defaultGlobals()
	fs := flag.NewFlagSet("latch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	if err := applyDefaults(fs, os.Getenv); err != nil {
		return fail(stderr, err)
	}
	// -h prints the usage to stdout (it was asked for); a bad flag prints
	// the flag package's one line and a pointer to help on stderr.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			mainUsage(stdout, fs)
			return 0
		}
		fmt.Fprintln(stderr, "latch: see latch help")
		return 1
	}
	if fs.NArg() == 0 {
		mainUsage(stderr, fs)
		return 1
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return help(rest, &g, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "latch: unknown command %q (see latch help)\n", name)
		return 1
	}
	cfs := newFlagSet(name, &g, stderr)
	runCmd := cmd.setup(cfs)
	cfs.Usage = func() {}
	pos, err := parseInterleaved(cfs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(stdout, cmd, cfs) // like latch help NAME
			return 0
		}
		fmt.Fprintf(stderr, "latch: see latch help %s\n", name) // the flag package printed the error
		return 1
	}
	if err := g.validate(); err != nil {
		return fail(stderr, err)
	}
	if len(pos) < cmd.minArgs || (cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs) {
		fmt.Fprintf(stderr, "latch: usage: latch %s %s\n", cmd.name, cmd.usage)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{g: &g, stdout: stdout, stderr: stderr}
	err = runCmd(ctx, e, pos)
	e.close()
	var status exitStatus
	if errors.As(err, &status) {
		return int(status) // a command latch ran (lock) exited so; it said why
	}
	if err != nil {
		return fail(stderr, err)
	}
	return 0
}

// fail prints err as the one line `latch: <what>` and returns status 1.
func fail(w io.Writer, err error) int {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if !strings.HasPrefix(msg, "latch: ") {
		msg = "latch: " + msg
	}
	fmt.Fprintln(w, msg)
	return 1
}

func mainUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: latch [global flags] COMMAND [flags] [args]\n\nCommands:\n")
	for _, c := range sortedCommands() {
		if c.hidden {
			continue
		}
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-9s %s\n", "help", "show a command's usage and flags")
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) { printFlag(&b, f) })
	fmt.Fprintf(w, "\nGlobal flags (before or after the command):\n%s", b.String())
	fmt.Fprintf(w, "\nEvery global flag can also be set in the environment\n  %s\n"+
		"or in a JSON config file ($LATCH_CONFIG, else latch/config.json in the user's config folder)\n"+
		"whose keys are the flag names.\n"+
		"The command line wins over the environment, which wins over the file.\n", envList())
	fmt.Fprintf(w, "\nExit status: 0 on success, 1 on any error.\n")
}

func help(args []string, g *globals, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fs := flag.NewFlagSet("latch", flag.ContinueOnError)
		g.register(fs)
		mainUsage(stdout, fs)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "latch: unknown command %q (see latch help)\n", args[0])
		return 1
	}
	fs := newFlagSet(cmd.name, g, stdout)
	cmd.setup(fs)
	commandUsage(stdout, cmd, fs)
	return 0
}

// withTimeout bounds ctx by --timeout.
func (e *env) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.g.timeout)
}
