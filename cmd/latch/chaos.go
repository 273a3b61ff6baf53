package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/latch-io/latch/cmd/latch/chaos"
)

func init() {
	register(&command{
		name:    "chaos",
		usage:   "[flags]",
		summary: "run a chaos test: a real cluster under faults, its histories checked for safety",
		help: `Starts --members latchd processes on loopback (with --fault-injection), a
fencedstore, and --workers worker processes (latch chaos-worker) running the
workloads; injects faults for --duration; then checks the recorded histories:
mutual exclusion through fencedstore, kv linearizability (porcupine), no lost
acknowledged write, session expiry bounds, one leader per election term.
The report goes to stdout and to --out/report.json; histories, the fault log
(faults.jsonl) and, on a failed linearizability check, porcupine's HTML
visualization stay in --out. Exit status 1 when any violation is found.

The global --session-ttl is the workers' session TTL; latch chaos uses 3s
unless it is given. With -o json the report is printed as JSON.

Fault kinds (--faults):
` + faultHelp(),
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			def := chaos.DefaultConfig()
			members := fs.Int("members", def.Members, "cluster size: 3 or 5")
			workers := fs.Int("workers", def.Workers, "worker processes, handed the workloads in turn")
			workload := fs.String("workload", strings.Join(def.Workloads, ","), "workloads to run: locks, kv, election (comma-separated)")
			faults := fs.String("faults", "all", "fault kinds to inject (comma-separated), all, or none")
			duration := fs.Duration("duration", def.Duration, "how long the workloads run under faults")
			interval := fs.Duration("fault-interval", def.FaultInterval, "time from one fault's start to the next's (faults never overlap)")
			seed := fs.Int64("seed", def.Seed, "seed of the fault schedule and the workers' choices")
			lockDelay := fs.Duration("lock-delay", def.LockDelay, "lock-delay asked with every lock request")
			out := fs.String("out", "chaos-out", "directory for histories, logs, the fault log and the report")
			bug := fs.String("inject-bug", "", "plant a bug the checkers must catch: "+strings.Join(chaos.Bugs, ", "))
			latchd := fs.String("latchd-bin", "", "latchd binary (default: beside latch, else built from a source checkout into --out/bin, else on PATH)")
			fenced := fs.String("fencedstore-bin", "", "fencedstore binary (default: beside latch, else built from a source checkout into --out/bin, else on PATH)")
			verbose := fs.Bool("v", false, "log every fault and worker start")
			mtls := fs.Bool("mtls", def.MutualTLS, "members require client certificates (mutual TLS) with ACLs enforced; every client presents the dev client certificate")
			cells := fs.Int("cell-count", 1, "1, or 2: a second cell that takes no fault serves a routing client throughout, and the cells checker fails the run if one of its operations fails or a path lands in the wrong cell")
			rogue := fs.Bool("rogue", def.Rogue, "add a worker with no rights that keeps attacking the others' locks and election nodes (the run fails if one attack succeeds)")
			return func(ctx context.Context, e *env, _ []string) error {
				cfg := def
				cfg.Members, cfg.Workers, cfg.Duration, cfg.FaultInterval = *members, *workers, *duration, *interval
				cfg.Seed, cfg.LockDelay, cfg.Out, cfg.InjectBug = *seed, *lockDelay, *out, *bug
				cfg.LatchdBin, cfg.FencedstoreBin, cfg.Verbose, cfg.Rogue, cfg.MutualTLS = *latchd, *fenced, *verbose, *rogue, *mtls
				cfg.Workloads = chaos.ParseList(*workload)
				cfg.Cells = *cells
				var err error
				if cfg.Faults, err = chaos.ParseFaults(*faults); err != nil {
					return err
				}
				if sessionTTLGiven(fs, e.g) {
					cfg.SessionTTL = e.g.sessionTTL
				}
				cfg.Log = e.stderr
				rep, err := chaos.Run(ctx, cfg)
				if rep != nil {
					if eerr := e.emit(rep, func(w io.Writer) { fmt.Fprint(w, rep.Text()) }); eerr != nil && err == nil {
						err = eerr
					}
				}
				return err
			}
		},
	})

	register(&command{
		name:    "chaos-worker",
		hidden:  true,
		usage:   "--role ROLE --id ID --history FILE [flags]",
		summary: "(internal) one worker process of latch chaos",
		help: `Started by latch chaos, not by people: connects with the global flags
(--endpoints, --ca, --session-ttl), runs one workload and appends every
operation to --history until SIGTERM, then closes its session.`,
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			var o chaos.WorkerOptions
			o.Register(fs)
			return func(ctx context.Context, e *env, _ []string) error {
				cfg, err := e.g.config()
				if err != nil {
					return err
				}
				if code := chaos.RunWorker(ctx, o, cfg, e.stderr); code != 0 {
					return fmt.Errorf("latch: chaos-worker %s: exit status %d", o.ID, code)
				}
				return nil
			}
		},
	})
}

// sessionTTLGiven reports whether --session-ttl was given, before or
// after the command name.
func sessionTTLGiven(fs *flag.FlagSet, g *globals) bool {
	given := g.sessionTTL != defaultGlobals().sessionTTL
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "session-ttl" })
	return given
}

func faultHelp() string {
	var b strings.Builder
	for _, k := range chaos.FaultKinds {
		fmt.Fprintf(&b, "  %-17s %s\n", k, k.Describe())
	}
	return b.String()
}
