package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/cmd/latch/bench"
	"github.com/latch-io/latch/session"
)

func init() {
	register(&command{
		name:    "bench",
		usage:   "SCENARIO [flags]",
		summary: "measure latency, lock throughput, session load or failover time",
		help: `Scenarios: ` + strings.Join(bench.Scenarios, ", ") + `, all, ` + bench.ScenarioFailover + `.

  get, stale-get  -n reads of one node of --data-size bytes (linearizable, or
                  stale from each client's read member; -c 64 --conns 64 is
                  64 clients; --read-from spread sends connection i's stale
                  reads to endpoint i mod n, so list learners in
                  --endpoints to read from them too; --read-from leader
                  sends them all to the leader, followers spreads them
                  over every member but the leader, learners over the
                  learners only; --member-cpu adds each member's reads
                  answered and CPU, against its CPU budget when
                  cluster.sh CPU=... gave it one)
  cached-get      -n reads with client.Cached() after every connection
                  answers from its cache: reads without a round trip
  cached-set      -n sets of one node cached by --cachers connections (each
                  reads it again before every set, untimed): what the
                  invalidations cost a write; --cachers 0 is the baseline
  create          -n creates of new persistent nodes of --data-size bytes
  set             -n sets of existing nodes of --data-size bytes, each
                  goroutine its own node (one commit each: -c 64 measures
                  commits/s with 64 proposers)
  watch           -n sets of one node by a writer while a watcher on another
                  connection waits for each: put start → watch event
  lock            -n uncontended Lock+Unlock cycles (acquire and release
                  latency); each goroutine its own session and lock path,
                  or a new path per cycle with --fresh-path
  contended       -c clients (default 64), each its own session, spread over
                  --conns connections (default 4); client i takes and
                  releases lock i mod --locks (a random lock every cycle with
                  --random) for --duration: acquire+release per second,
                  acquire latency, fairness = max/min grants
  sessions        opens --sessions sessions with --session-ttl (default 10s),
                  -c at a time, over --conns connections (1: all on one;
                  equal to --sessions: one connection each); holds them for
                  --window after a TTL/3 settle and reads the leader's
                  /metrics: CPU % of one core over the window, resident
                  memory per session, goroutines and stack per
                  connection; then closes them. The clients
                  share one config's TLS session tickets, so connections
                  resume; --full-handshakes gives each client its own, as
                  separate processes would have
  storm           the sessions scenario with one connection and a full
                  handshake per session (a reconnect storm's cost), counting
                  leader changes (want 0); then, with --kill kill|stop, the
                  leader (on this host: its admin status names its pid) is
                  signalled while they are held, and every client's time
                  back on the new leader, sessions lost and leader changes
                  within --observe (want 1) are reported; with --flood D,
                  lock cycles run for D quiet and D under a flood of
                  certificate-less handshakes and probes at the leader,
                  sent by a latch bench flood process of its own
  flood           opens QUIC handshakes without a client certificate and
                  sends leader probes at --flood-target as fast as it can
                  for --duration (64 and 8 goroutines), and prints how
                  many; needs no cluster flags
  all             one after the other: lock, set, watch (-n each); contended
                  with 64 clients on a connection each, a random lock per
                  cycle (--duration); set by 64 proposers on 8 connections
                  (20,000 sets); --sessions sessions on a connection each,
                  held 2s; then a summary table of every figure

  failover        starts --members latchd processes itself (--latchd-bin, or
                  go build ./cmd/latchd) and runs --rounds rounds: a holder
                  and --waiters waiters on one lock (one connection each),
                  the leader gets --signal (kill, stop, or partition: its
                  raft traffic is cut, clients still reach it) and the holder
                  releases at once; each waiter releases when granted.
                  Reports signal -> new leader elected, -> every client
                  connected to it, -> first grant, -> all granted (median,
                  worst). Every call has --timeout; a failed call, a grant
                  out of FIFO order, a token not increasing or a session
                  lost fails the run. Ignores --endpoints and TLS flags.

-n and -c: operations and goroutines (get, stale-get, create, lock: default
2000 and 1). Every run works under --prefix (default /latch-bench-<random>,
which must not exist) and deletes it afterwards unless --keep. Each
operation, the set-up and the clean-up steps are bounded by --timeout; the
whole run by --max-time, after which it reports what it measured, marked
truncated. Endpoints and --admin must be loopback addresses unless
--allow-remote: a benchmark loads the cluster it runs against.

The leader's admin address for sessions comes from the member list (its
http address); give --admin HOST:PORT when members do not publish one.
With -o json the report is one JSON document (durations in ms).

all --baseline-endpoints E1,E2,... [--baseline-ca FILE] [--rounds N]
compares two clusters in one run (two builds, say, each started with
cmd/latch/bench/testdata/cluster.sh at its own BASE): every row runs on
both, one right after the other, the order alternating by round, for N
rounds (default 1 here); the table lists each round's figures side by side.

With --cells FILE, contended runs in every cell of the map at once (each
cell's clients contend for locks of their cell, under
/CELL/latch-bench-<random>) and reports the aggregate cycles/s, the highest
p99 and each cell's report with its leader's CPU per cycle (scraped from
the leader's admin /metrics before and after the window).`,
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) runFunc {
			var c bench.Config
			fs.IntVar(&c.Ops, "n", 0, "operations (get, stale-get, create, lock) (default 2000)")
			fs.IntVar(&c.Concurrency, "c", 0, "goroutines; contended: clients (64); sessions: concurrent opens (64) (default 1)")
			fs.IntVar(&c.Conns, "conns", 0, "client connections to spread the work over (default 1; contended 4)")
			fs.IntVar(&c.Locks, "locks", bench.DefaultLocks, "locks the contended clients spread over")
			fs.DurationVar(&c.Duration, "duration", bench.DefaultDuration, "how long contended runs")
			fs.Float64Var(&c.Reference, "reference", 0, "contended: cycles/s of a reference run (the peak); reports the goodput in percent of it")
			fs.IntVar(&c.Sessions, "sessions", bench.DefaultSessions, "sessions the sessions scenario opens")
			fs.IntVar(&c.Cachers, "cachers", 0, "cached-set: connections caching the node written")
			fs.StringVar(&c.ReadFrom, "read-from", "", "where each connection's stale reads go: spread (connection i to endpoint i mod n), nearest (the fastest non-leader), leader, followers or learners (spread over every member but the leader, or over the learners) (default: the first endpoint that answers)")
			fs.BoolVar(&c.MemberCPU, "member-cpu", false, "get, stale-get, cached-get: report every member's reads answered and CPU over the run (admin /metrics before and after), and its CPU budget and throttling when its cgroup caps it (a member on this host)")
			failureTimeout := fs.Duration("failure-timeout", 0, "the client's FailureTimeout on every connection (default 300ms): how long the leader may stay silent while a call waits; raise it on a machine so loaded that the leader answers pings late")
			fs.BoolVar(&c.LeaderCPU, "leader-cpu", false, "set, get, stale-get, cached-get, cached-set, contended: report the leader process's CPU per operation (its admin /metrics before and after; needs an admin certificate)")
			fs.DurationVar(&c.Window, "window", bench.DefaultWindow, "how long the sessions scenario holds its sessions while measuring the leader")
			fs.StringVar(&c.Kill, "kill", "", "storm: kill (SIGKILL), stop (SIGSTOP) stall (hold its raft log writes; members need --fault-injection) or freeze (fsfreeze its data dir: cluster.sh LOOPFS=1, root) the leader while the sessions are held")
			fs.DurationVar(&c.Observe, "observe", bench.DefaultObserve, "storm: how long to watch after --kill before counting lost sessions and leader changes")
			fs.DurationVar(&c.Flood, "flood", 0, "storm: lock cycles for this long without, then with, a flood of certificate-less handshakes and probes at the leader")
			floodTarget := fs.String("flood-target", "", "flood: the client address (host:port) to flood")
			fs.BoolVar(&c.FullHandshakes, "full-handshakes", false, "sessions: every connection a full TLS handshake (no session tickets shared between clients)")
			fs.IntVar(&c.DataSize, "data-size", bench.DefaultDataSize, "bytes of data of created and read nodes")
			fs.BoolVar(&c.RandomLock, "random", false, "contended: every cycle takes a random lock instead of lock i mod --locks")
			fs.BoolVar(&c.FreshPath, "fresh-path", false, "lock: a new lock path every cycle instead of one per goroutine")
			fs.StringVar(&c.Prefix, "prefix", "", "node the run works under; must not exist (default /latch-bench-<random>)")
			fs.BoolVar(&c.Keep, "keep", false, "leave --prefix and its nodes in place")
			fs.DurationVar(&c.MaxTime, "max-time", bench.DefaultMaxTime, "upper bound on the whole run")
			fs.BoolVar(&c.AllowRemote, "allow-remote", false, "allow non-loopback endpoints and --admin")
			var fc bench.FailoverConfig
			fs.IntVar(&fc.Members, "members", bench.DefaultFailoverMembers, "failover: latchd processes to start")
			fs.IntVar(&fc.Rounds, "rounds", bench.DefaultFailoverRounds, "failover: leader failures; all with --baseline-endpoints: rounds")
			var baseline baselineFlags
			fs.StringVar(&baseline.endpoints, "baseline-endpoints", "", "all: also measure the cluster at these endpoints, row by row alternating with this one, and compare")
			fs.StringVar(&baseline.ca, "baseline-ca", "", "all: CA file of the --baseline-endpoints cluster (default --ca)")
			fs.IntVar(&fc.Waiters, "waiters", bench.DefaultFailoverWaiters, "failover: clients queued behind the holder")
			signal := fs.String("signal", "kill", "failover: kill (SIGKILL) or stop (SIGSTOP) the leader, or partition it from the other members")
			fs.StringVar(&fc.LatchdBin, "latchd-bin", "", "failover: latchd binary (default: go build ./cmd/latchd)")
			fs.StringVar(&fc.Dir, "dir", "", "failover: directory for the members' data and logs, kept afterwards (default: a temporary one, removed)")
			verbose := fs.Bool("v", false, "log progress to stderr")
			clientLog := fs.String("client-log", "", "write every client's debug log (reconnections, refusals, expiries; sessions and storm: each line names its connection) to `FILE`")
			cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile (the client side) to `FILE`")
			return func(ctx context.Context, e *env, args []string) error {
				if args[0] == bench.ScenarioFailover {
					cfg := fc
					switch *signal {
					case "kill":
						cfg.Signal = syscall.SIGKILL
					case "stop":
						cfg.Signal = syscall.SIGSTOP
					case "partition":
						cfg.Partition = true
					default:
						return fmt.Errorf("%w: --signal %q: want kill, stop or partition", errUsage, *signal)
					}
					cfg.OpTimeout = e.g.timeout
					if *verbose {
						cfg.Log = e.stderr
					}
					rep, err := bench.RunFailover(ctx, cfg)
					if err != nil {
						return err
					}
					return e.emit(rep, func(w io.Writer) { rep.WriteTable(w) })
				}
				if args[0] == bench.ScenarioFlood {
					if *floodTarget == "" {
						return fmt.Errorf("%w: flood needs --flood-target", errUsage)
					}
					attempts, probes := bench.Flood(ctx, *floodTarget, c.Duration)
					_, err := io.WriteString(e.stdout, bench.FormatFlood(attempts, probes))
					return err
				}
				cfg := c
				cfg.Scenario = args[0]
				if exe, err := os.Executable(); err == nil && cfg.Flood > 0 {
					cfg.FloodCommand = []string{exe, "bench"}
				}
				if cfg.DataSize == 0 {
					cfg.DataSize = -1 // --data-size 0: no data, not the default
				}
				var err error
				if cfg.Client, err = e.g.config(); err != nil {
					return err
				}
				cfg.Client.ClientName = "latch-bench"
				cfg.Client.FailureTimeout = *failureTimeout
				cfg.Admin = e.g.admin
				cfg.OpTimeout = e.g.timeout
				if *verbose {
					cfg.Log = e.stderr
				}
				if *clientLog != "" {
					f, err := os.Create(*clientLog)
					if err != nil {
						return err
					}
					defer f.Close()
					cfg.Client.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
				}
				if *cpuProfile != "" {
					f, err := os.Create(*cpuProfile)
					if err != nil {
						return err
					}
					defer f.Close()
					if err := pprof.StartCPUProfile(f); err != nil {
						return err
					}
					defer pprof.StopCPUProfile()
				}
				if cfg.Scenario == bench.ScenarioAll && baseline.endpoints != "" {
					rounds := 1 // the failover default is not this mode's
					fs.Visit(func(f *flag.Flag) {
						if f.Name == "rounds" {
							rounds = fc.Rounds
						}
					})
					return runCompare(ctx, e, cfg, baseline, rounds)
				}
				if cfg.Scenario == bench.ScenarioAll {
					return runAll(ctx, e, cfg)
				}
				if e.g.cells != "" {
					m, err := client.ReadCellMapFile(e.g.cells)
					if err != nil {
						return fmt.Errorf("%w: --cells: %v", errUsage, err)
					}
					rep, err := bench.RunCells(ctx, cfg, m)
					if err != nil {
						return err
					}
					return e.emit(rep, func(w io.Writer) { rep.WriteTable(w) })
				}
				rep, err := bench.Run(ctx, cfg)
				if err != nil {
					return err
				}
				return e.emit(rep, func(w io.Writer) { rep.WriteTable(w) })
			}
		},
	})
}

// runAll runs `latch bench all`: each report as it completes, then the
// summary (or, with -o json, one JSON array of the reports).
func runAll(ctx context.Context, e *env, cfg bench.Config) error {
	if e.g.output == "json" {
		reps, err := bench.RunAll(ctx, cfg, nil)
		if eerr := e.emit(reps, nil); eerr != nil {
			return eerr
		}
		return err
	}
	reps, err := bench.RunAll(ctx, cfg, func(r *bench.Report) {
		r.WriteTable(e.stdout)
		fmt.Fprintln(e.stdout)
	})
	bench.WriteSummary(e.stdout, reps)
	return err
}

// baselineFlags name the cluster `latch bench all` compares with.
type baselineFlags struct{ endpoints, ca string }

// runCompare runs `latch bench all --baseline-endpoints`: every row on the
// baseline cluster and on this one, alternating, then the side-by-side
// table (or, with -o json, {"baseline": rounds, "this": rounds}).
func runCompare(ctx context.Context, e *env, cfg bench.Config, b baselineFlags, rounds int) error {
	bcfg := cfg
	bcfg.Client.Endpoints = nil
	for _, ep := range strings.Split(b.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			bcfg.Client.Endpoints = append(bcfg.Client.Endpoints, ep)
		}
	}
	if b.ca != "" {
		tlsConf, err := session.ClientTLS(b.ca, e.g.cert, e.g.key)
		if err != nil {
			return err
		}
		bcfg.Client.TLS = tlsConf
	}
	bcfg.Admin = "" // the baseline's own leader, from its member list
	got, was, err := bench.RunCompare(ctx, cfg, bcfg, rounds)
	if e.g.output == "json" {
		if eerr := e.emit(map[string][][]*bench.Report{"baseline": was, "this": got}, nil); eerr != nil {
			return eerr
		}
		return err
	}
	bench.WriteCompare(e.stdout, got, was)
	return err
}
