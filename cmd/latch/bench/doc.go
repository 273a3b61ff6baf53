// Package bench is `latch bench`: it measures what users of a running
// latch cluster feel — read and write latency, lock acquire latency,
// contended lock throughput and fairness, and what holding thousands of
// sessions costs the leader.
//
//	cfg := bench.Config{Scenario: bench.ScenarioContended, Client: client.Config{Endpoints: eps, TLS: tlsConf}}
//	rep, err := bench.Run(ctx, cfg)
//	rep.WriteTable(os.Stdout) // or json.Marshal(rep)
//
// # Scenarios
//
//   - get, stale-get, create: Ops operations from Concurrency goroutines
//     spread over Conns connections; latency p50/p90/p99/max/mean and
//     ops/s. Reads go to one node of DataSize bytes; creates make new
//     persistent nodes of DataSize bytes under Prefix/create.
//     Stale reads go to each connection's read member, chosen by ReadFrom
//     (spread: connection i starts at endpoint i mod n; followers and
//     learners: the same over the members the member list names so;
//     nearest: the client's probe; leader). cached-get reads with
//     client.Cached() once every connection answers from its cache. With
//     LeaderCPU, the leader's CPU per read (or, for cached-set, per set);
//     with MemberCPU, every member's reads answered and CPU, and its CPU
//     budget and throttling when its cgroup caps it.
//   - cached-set: Ops sets of one node that Cachers other connections
//     cache (each reads it again, untimed, before every set), so each set
//     waits for Cachers invalidations; Cachers 0 is the baseline.
//   - lock: Ops Lock+Unlock cycles of a free lock; acquire and release
//     latency. Each goroutine has its own session and lock path
//     (Prefix/lock/gW), or a new path per cycle with FreshPath.
//   - contended: Concurrency clients, each its own session, on Locks locks
//     for Duration; client i always takes lock i mod Locks and releases it
//     at once. Throughput is completed acquire+release cycles per second,
//     acquire latency includes the wait in the queue, fairness is the
//     most grants one client got over the fewest. It also reports the
//     elections during the window (the rise of the highest raft term the
//     members' admin /v1/status report; want 0), with LeaderCPU the
//     liveness pings the leader echoed per cycle, and with Reference
//     (the cycles/s of a reference run, the peak) the goodput in percent
//     of it: the figures issue 21's overload check (4× the saturating
//     client count) asks for.
//   - sessions: Sessions sessions (TTL Client.SessionTTL) opened
//     Concurrency at a time over Conns connections; open rate. Then, after
//     a settle of TTL/3, the leader's CPU over Window in % of one core
//     (process_cpu_seconds_total), next to a baseline taken over Window/5
//     before the first open; its resident memory per session ((RSS at the
//     end of the window − RSS before the first open) / Sessions, from
//     process_resident_memory_bytes); the same for the live heap as of the
//     leader's last GC (estimated from its GC goal,
//     go_memstats_next_gc_bytes, less the goroutine stacks it counts);
//     the leader's goroutines and their stacks per connection
//     (go_goroutines, go_memstats_stack_inuse_bytes); and this process's
//     own CPU.
//
// # Decisions
//
//   - A run owns a control connection (set-up, clean-up, leader lookup),
//     separate from the measured ones and never timed; its session exists
//     before the sessions scenario's "before" sample, so it is not counted
//     in the per-session memory.
//   - Connections: Conns clients (client.Dial each), goroutine or session
//     i on client i mod Conns. Default 1, contended 4: 64 sessions on a
//     few connections is how a handful of client processes with a pool of
//     workers each would look, without 64 QUIC connections competing for
//     the two cores of a small test machine. Every Dial opens a default
//     session: the sessions scenario counts it as that connection's first
//     session (so Conns = Sessions is one session per connection, and the
//     open rate then includes the QUIC and TLS handshakes); the other
//     scenarios leave it idle.
//   - Everything lives under Prefix (default /latch-bench-<random>, which
//     must not exist) and is deleted afterwards, 128 deletes per Multi,
//     unless Keep. A failed clean-up is logged with the command to finish
//     it, not returned: the measurement stands.
//   - Bounds: each operation and set-up step by OpTimeout (the CLI's
//     --timeout), the whole measured phase by MaxTime; ^C or MaxTime stop
//     it and the report covers what completed (Truncated). Clean-up and
//     session closes run after that on their own bounded contexts.
//   - The first failing operation fails the run (a benchmark that hides
//     errors measures something else).
//   - The leader measured by sessions is the member the member list marks
//     leader (its HTTP address; an unspecified host is replaced by the
//     host of its client address) or Admin. Its /v1/status must say
//     Leader before the first open (else ErrAdminNotLeader) and after the
//     window, with the same id (else ErrLeaderChanged: the figures would
//     mix two processes); a re-election of the same member in between is
//     a note in the report. Sessions that
//     ended while held fail the run with ErrSessionsLost.
//   - Loopback only unless AllowRemote: a benchmark loads the cluster it
//     runs against, so aiming it at a shared one takes a deliberate flag.
//   - Percentiles are nearest-rank (always a measured sample).
//   - Stale reads go to each connection's read member (the client's
//     second connection), not to the leader unless ReadFrom is leader or
//     the leader is the endpoint that answered first: stale-get measures
//     how reads spread over members, and the report notes how many
//     connections read from each. Who answered is the members' word, not
//     the client's: MemberCPU reads each member's latch_reads_total, so a
//     read a busy member refused (behind) and the leader answered counts
//     for the leader.
//   - A member's CPU budget is read from its own cgroup (v1 cpu
//     controller, else v2 cpu.max) through the pid its /v1/status names,
//     for members at a loopback admin address only: on another host that
//     pid is not theirs. Its throttled share is of the periods in which
//     it ran: near 100% the budget is what limits it, which is what a
//     measurement of what members add needs (the load generator must not
//     run out first).
package bench
