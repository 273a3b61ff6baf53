// Package chaos is `latch chaos`: it runs a real latch cluster under
// faults, records what clients did, and proves from the records that
// nothing unsafe happened.
//
//	cfg := chaos.DefaultConfig()
//	cfg.Out = "chaos-out"
//	rep, err := chaos.Run(ctx, cfg) // errors.Is(err, chaos.ErrViolations) when a checker failed
//	fmt.Print(rep.Text())
//
// # A run
//
// Run finds latchd and fencedstore (Config.LatchdBin and FencedstoreBin,
// else beside the latch executable, else built from a source checkout,
// else on PATH), starts Config.Members latchd processes on loopback
// through server/proc (own data dirs under Out/members, free ports, raft
// timeouts of 500ms, --fault-injection, a dev PKI in Out/tls), a
// fencedstore, and Config.Workers worker processes (`latch chaos-worker`,
// one workload each, the workloads handed out in turn). It injects one
// fault at a time for Config.Duration, then heals everything, stops the
// workers with SIGTERM (they close their sessions), reads every kv key
// one last time, fetches fencedstore's GET /history, and runs the
// checkers on the files in Out. LoadEvidence and Check judge an Out
// directory again later.
//
// # Workers and histories
//
// A worker is one client with one session. Before it sends an operation it
// appends an invoke record to its history (Out/workers/<id>.jsonl), and
// after the answer a complete record (ok, fail = definitely not applied,
// unknown = may have been applied), each as one write(2) of one line: the
// kernel holds it from then on, so SIGKILL loses no record of anything the
// worker went on from. An operation without a complete record is unknown.
// Session state changes and a lock's Lost() are one-record events. A
// worker whose session expires exits, and the orchestrator starts a
// successor (new id, new session) in its slot; so does a killed worker.
//
// Workloads:
//   - kv: create, set (at the version last read, or unconditionally), get,
//     delete and two txns (if the value is the one last read then set it;
//     if absent then create else read) on /chaos/kv/k0..k2, every written
//     value unique; the model follows each txn's branch;
//   - locks: exclusive and shared locks on /chaos/locks/a, /chaos/locks/a/x
//     and /chaos/locks/b (a covers a/x); an exclusive holder does
//     read-modify-write increments of the fencedstore counters its lock
//     covers with its fencing token, a shared holder reads them;
//   - election: campaigners on /chaos/election; the winner writes its term
//     (its token) to the fencedstore key "election", holds a while and
//     resigns.
//
// # Faults
//
// worker-kill, worker-pause (SIGSTOP for TTL*1.5+0.5s, a GC pause),
// leader-kill, follower-kill (then restart), leader-pause,
// follower-pause, partition-leader, partition-split (a random minority
// against the majority) and partition-flap. Partitions go through the
// server's fault-injecting raft stream layer (server/raftnode/faultlayer.go): each
// member of a cut pair is told by POST /v1/faults to refuse dials to the
// other and drop its connections to it. The schedule is rounds of every
// enabled kind in an order drawn from Config.Seed, so every kind fires
// once per round. Every fault's start and end are logged to faults.jsonl.
// After each fault the cluster must elect a ready leader again within 30s
// (the recovery verdict).
//
// # Checkers
//
// mutual-exclusion (fencedstore history: fencing-order, lost-update,
// overlapping-holders; worker histories: use-after-lost),
// linearizability (porcupine, per kv key, unknown outcomes return at
// +infinity as in etcd's robustness tests; when any checker fails, the
// HTML visualization of the kv history is written to
// Out/kv-linearizability.html),
// no-lost-writes (the final read shows one of the last acknowledged
// writes, or a write of unknown outcome), sessions and election. Each
// violation is named by a Violation* constant.
//
// # Decisions
//
//   - Session bounds: a killed worker's session must be gone from the
//     session list within TTL + TTL/3 + lock-delay + poll interval + 1s
//     (reaper and commit) of the kill. A new leader grants every session
//     a fresh TTL, so a member or partition fault that began before that
//     deadline moves it to the fault's end + 4 election timeouts + 1s +
//     the same bound (faults in a row keep moving it). A session may only
//     end early when its worker was paused, exited, closed it, or saw a
//     jeopardy (could not reach a leader) in the TTL before.
//   - A section is the span, in the store's own order, from a client's
//     accepted read to its accepted write with the same token. Two
//     clients' sections on one key interleaving while both workers had
//     been granted an exclusive lock covering the key under those tokens
//     is overlapping-holders.
//   - Faults never overlap, so a majority is always up after healing; the
//     runner checks safety under faults and liveness after them.
//   - Clocks: all processes share one machine, so the workers'
//     time.Now().UnixNano() orders events across processes well enough
//     for real-time order; checkers that need certainty use one worker's
//     program order (use-after-lost) or the store's order (fencing).
package chaos
