// Package server runs one latch cluster member: hashicorp/raft over a
// write-ahead log and stable store (hashicorp/raft-wal, package raftstore), a thin raft FSM
// over the namespace state machine, membership, snapshots and the admin HTTP
// endpoint. Client-facing layers (the QUIC listener, dispatch, watches,
// leases) are built on the methods below.
//
// # Use
//
//	cfg := server.DefaultConfig()
//	cfg.ID, cfg.DataDir = "n1", "/var/lib/latch"
//	cfg.Bootstrap = []server.Peer{{ID: "n1", RaftAddr: "10.0.0.1:7421"}, ...}
//	s, err := server.New(cfg) // opens stores, binds raft and HTTP listeners
//	s.SetObserver(hub)        // optional, before Start
//	err = s.Start()           // raft, bootstrap, membership loop, HTTP
//	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/a"})
//	err = s.LinearizableRead(ctx); data, stat, err := s.Store().Get("/a")
//	s.Close()
//
// # Data directory
//
//	<DataDir>/raft-wal   raft log and stable store (raft-wal, one fsync per
//	                     append batch; an older <DataDir>/raft badger store
//	                     is migrated into it once)
//	<DataDir>/fsm        the namespace (badger)
//	<DataDir>/snapshots  raft snapshots (FileSnapshotStore, two kept)
//
// # Decisions
//
//   - Durable FSM: raft runs with NoSnapshotRestoreOnStart. On restart the
//     namespace resumes from its own applied index and raft replays from
//     the last snapshot's index; the namespace skips entries it already
//     applied, so nothing is applied twice. A snapshot syncs the namespace
//     first, so its durable state is never behind the newest snapshot.
//   - Authorization (acl.go, caps.go): every client command carries the
//     connection's TLS identity and is checked inside Apply against the
//     replicated ACL rules; reads, listings, lock queues, lock history and
//     watch events are checked here with Store.Authorize. Before it is
//     ready a new leader writes the first rules (Config.Admins,
//     Config.ACLDefault) through the log when there are none. Session and
//     watch caps (per identity, per anonymous host, cluster-wide) are the
//     leader's in-memory bookkeeping, never Apply's.
//   - Cells (cell.go): with Config.Cell a member serves /Cell and below
//     only. front.checkCell refuses any request naming another path
//     (Path, Node, Sequencer.Path, each Multi op) with session.ErrWrongCell
//     before its handler runs, on the QUIC front and for the HTTP API's
//     bodies; apiFront.checkCell refuses a route's {path...} the same way
//     before it is served or forwarded. The check is per-member config at
//     the front, never in Apply: every member of a cell has the same flag,
//     and what Apply decides still comes from the log alone. The leader
//     creates /Cell before it is ready (bootstrapCell).
//   - Leader readiness: after winning an election the leader commits a
//     barrier before IsLeader reports true, SubscribeLeadership delivers
//     true, or linearizable reads are served. A term change without an
//     observed step-down is delivered as false then true.
//   - Linearizable reads use the read-index method: note the commit index,
//     confirm leadership with a quorum (one VerifyLeader round in flight;
//     callers arriving meanwhile share the next round), then wait until the
//     FSM applied the last command at or below that index. Raft never hands
//     no-op and barrier entries to the FSM, hence "last command".
//   - Propose is leader only; a follower answers *NotLeaderError naming the
//     leader's id, client and admin addresses from the member metadata that
//     the namespace replicates. ErrUnknownOutcome means the entry may still
//     commit (leadership lost or ctx ended after raft took it).
//   - Membership metadata: the ready leader records its own addresses
//     (OpSetMember). Every other member in the configuration posts its
//     addresses to the leader's POST /v1/join with update_only, which only
//     ever refreshes metadata: a member an operator removed never re-adds
//     itself. Only a member started with Join and no prior raft state asks
//     to be added as a voter. Followers answer /v1/join and /v1/remove with
//     a 307 to the leader's admin address (JSON body names it too).
//   - RemoveMember changes the raft configuration before forgetting the
//     metadata, except when the leader removes itself (it steps down once
//     the change commits, so it forgets its metadata first).
//   - Metrics go to prometheus' default registry (with the Go and process
//     collectors); raft's go-metrics reach it through one process-wide sink
//     registered once. Member series carry a "member" label.
//   - Raft's hclog output is routed into the configured slog.Logger.
//   - Locks (lock.go): a new request comes as MsgLockCall on the mux
//     stream, answered granted or queued at once; a queued one is waited
//     for on a MsgLock stream, woken only by its own grant (waiters keyed
//     by request node, fed by the apply observer). The stream ends at the
//     grant; a held lock's loss is told on the connection's lock notices
//     stream. A stream the
//     client resets on a live connection withdraws the request (or
//     releases the lock); a lost connection leaves it for the client to
//     re-attach with MsgLock{Node}. The ready leader proposes OpNoop ticks
//     when the namespace's NextTimer is due, so hold TTLs and lock-delays
//     end through the log. Lock-delay default and cap are the cluster
//     settings DefaultLockDelayMillis (5s) and MaxLockDelayMillis (60s).
//   - HTTP/JSON API (api*.go): a second front on Config.APIAddr (HTTPS
//     with the client front's certificate and client CA) serving
//     sessions, nodes, locks, elections, SSE watches, an OpenAPI document
//     (apispec/openapi.json) and the web console (console/). It holds no
//     logic: unary requests run through front.call, the QUIC front's
//     handlers; locks through the lock service's waiters; watches through
//     the watch hub. Followers forward leader-only requests to the
//     leader's API with the caller's identity, believed only from a peer
//     presenting this member's own certificate. api.go says the rest.
//   - Integrity: a storage fault in the namespace store, a raft log entry
//     that fails its checksum (raftstore/checksum.go: every entry is
//     checked on read, and the whole log before the member starts, which
//     it refuses on a damaged one), or a state hash
//     that a majority of members disagrees with (hashcheck.go: the leader
//     proposes OpHashCheck every HashCheckInterval, every member hashes
//     that index and compares over the admin API), makes the member fail
//     (storagefault.go): it stops serving, hands off leadership (to a
//     member with space, handoff.go), stops raft and closes Failed, on
//     which latchd exits 1.
//   - Disk full (diskfull.go): below Config.MinFreeSpace free bytes the
//     member refuses proposals with ErrNoSpace and the FSM waits, instead
//     of badger dying with SIGBUS in a memory-mapped write; a leader in
//     that state hands leadership to the most up-to-date voter with space
//     (handoff.go), so the cluster keeps serving.
//   - A disk that stops answering (stall.go): a raft log write in flight
//     for longer than Config.StorageStallTimeout fails the member with
//     ErrStorageStalled and latchd exits at once, so a stuck leader's
//     heartbeats stop and the others elect.
//   - Restore (snapshotcheck.go, backup.go): a backup, and every snapshot
//     raft installs, is checked whole by namespace.CheckSnapshot (checksum,
//     metadata, every lock request has its session and its own node)
//     before the store drops its state; a refused one changes nothing
//     (raft would panic on a user restore the FSM refuses).
//   - Time (clusterclock.go): the leader stamps entries with the cluster
//     time, the latest committed time advanced by its monotonic clock
//     (Config.Monotonic); the wall clock (Config.Clock) is read only for a
//     cluster's very first entry. Lock timers and session leases are
//     therefore immune to wall-clock steps on any member.
//   - Cluster settings (settings.go): namespace.Limits are replicated. The
//     first leader of a cluster that has none records its Config.Limits
//     (OpSetLimits, conditional on there being none) before it becomes
//     ready; afterwards a member's own Config.Limits are ignored, with a
//     warning when they differ, and GET/PUT /v1/limits read and change
//     the settings through the log.
//   - An entry that does not decode is applied as an OpNoop; its grants
//     and events reach the observers, and its proposer gets the decode
//     error.
//
// # Failover timing
//
// The defaults (DefaultConfig; latchd's flags) are for a LAN: heartbeat
// and election timeouts 100ms, leader lease 100ms, commit timeout 20ms,
// pre-vote on (hashicorp/raft's default; latch never turns it off). The
// chain a client feels when the leader dies, with its budget:
//
//  1. Members notice (100-300ms): the leader heartbeats every 10-20ms; a
//     follower checks at random 100-200ms intervals and starts a pre-vote
//     once it heard nothing for 100ms. Voters refuse while they still hear
//     from a leader, so the election completes once a majority of the
//     others timed out (with 3 members the second follower, with 5 the
//     third of four).
//  2. Elect (a few ms): pre-vote and vote round trips, the vote fsynced;
//     then the leader commits its barrier (one fsync round), loads the
//     lease table and is ready. A follower names a leader (NotLeaderError,
//     probe answers) only while it heard from it within half a heartbeat
//     timeout, so clients are told "no leader yet", never the dead one.
//  3. Clients notice (225-300ms, in parallel with 1-2): while a call
//     waits, the client pings (a QUIC datagram the member echoes, see
//     session.(*Conn).EchoPings) after a quarter of
//     client.Config.FailureTimeout (300ms) of silence and closes after the
//     rest (package client); idle connections only after
//     IdleFailureTimeout (10s).
//  4. Clients reconnect (a few ms): they probe every member at once with
//     one datagram (probe.go, session.Probe), dial only the member that
//     answers it is the ready leader, say Hello and resume their sessions;
//     while members answer "no leader yet" they probe again every 20ms
//     (less often after 300ms).
//  5. First grant (one commit): the holder's release, retried on the new
//     connection (a release is idempotent by request node), commits and
//     the grant goes to the next waiter, which re-attached to its request.
//
// Total: max(1-2, 3) + 4 + 5, about 0.25-0.45s; `latch bench failover`
// measures it (README, Failover).
//
// Safety with the faster timing:
//
//   - Session leases do not depend on raft timing. A new leader gives
//     every session a fresh full TTL from when it loads the table
//     (expiry.go), so a session never expires earlier than TTL after its
//     last acknowledged keepalive, whatever the number of elections.
//     Elections under load cost clients a reconnection, never a session.
//   - Keepalives are answered by the leader without a quorum check, so a
//     deposed leader must stop answering before a successor can serve:
//     LeaderLeaseTimeout is at most HeartbeatTimeout (equal by default).
//     The old leader steps down once no quorum answered it for the lease,
//     timed from when answers arrived. A successor needs a majority of
//     voters that heard nothing from the old leader for a full heartbeat
//     timeout, timed from when its requests arrived (earlier), and then
//     still runs a pre-vote and a vote round, fsyncs its vote, commits a
//     barrier and loads the lease table before it answers a keepalive.
//     So the old leader stops acknowledging before the successor starts
//     (by those rounds), an ack from it is for a keepalive sent before
//     the new term, and the client's LeaseEnd (send time + TTL) is within
//     the new leader's deadline. A paused leader (SIGSTOP) may answer a
//     keepalive that waited in its socket before raft's lease check runs
//     on resume; the client counts that lease from when it sent it, so
//     the overlap is at most the part of the pause after the new leader
//     loaded, and the lock-delay that separates an expired holder from
//     the next one is far longer. (50ms, half the heartbeat timeout, made
//     leaders on a loaded 2-core machine step down after 70-90ms stalls,
//     each stall an election.)
//   - Lock-delay and hold TTLs are stamped by the leader into the log and
//     decided in Apply; the timing above does not change them.
//   - A starved follower that times out does not depose a healthy leader:
//     its pre-vote is refused by the members that still hear from the
//     leader. A starved leader steps down after 100ms without a quorum;
//     that costs an election, not safety.
//
// # Testing
//
// Package servertest starts in-process clusters (real badger, real raft
// over mutual TLS on loopback); package proc runs real latchd processes for crash
// tests (SIGKILL, SIGSTOP).
//
// # Member traffic (transport.go, auth.go)
//
// Raft runs on raft's NetworkTransport over a TLS stream layer (over the
// fault layer with FaultInjection, over TCP): every connection is mutual
// TLS 1.3 between member certificates of Config.ClusterCA
// (session.MemberTLS), the handshake done on first use with a 10s bound,
// so an accepted connection never stalls raft's accept loop and a
// non-member never reaches raft. The admin endpoint is HTTPS only, with the
// member certificate; who may call what is decided per route from the
// verified client certificate (adminCaller): a member (session.PeerMember)
// or an admin (Config.Admins, or Config.AdminCheck for admins from
// elsewhere; in Dev without Admins, any dev certificate). A member may only
// join, update or remove itself. Members call each other's admin endpoint
// (joins, address refreshes, "was I removed?") with their member
// certificate and accept only a member's. A join that takes a live
// member's id or raft address is ErrMemberExists unless an admin sends
// replace. Config.Recover runs raft.RecoverCluster before raft starts.
//
// # Admin HTTP (HTTPS)
//
//	GET  /healthz      200 while the process runs and raft is not shut down
//	GET  /readyz       200 when a leader is known and this member applied all it knows committed
//	GET  /metrics      Prometheus text
//	GET  /v1/status    Status as JSON
//	POST /v1/join      member or admin: {"id","raft_addr","client_addr","http_addr","api_addr","update_only","replace"}
//	POST /v1/remove    member (itself) or admin: {"id"}
//	POST /v1/snapshot  member or admin: take a snapshot now; {"ok":true,"index":N}; 429 within SnapshotMinInterval
//	POST /v1/faults    member or admin, only with FaultInjection: {"block":["raftaddr",...]} cuts raft traffic to those members ([] heals)
//	GET  /v1/faults    member or admin: the blocked list
//	POST /v1/faults/storage  member or admin, only with FaultInjection: {"stall":true} holds every raft log write ({"stall":false} releases)
//	members/add, members/promote, snapshot download/restore, PUT /v1/limits: admin
//
// A refusal is 403 {"code":"AdminDenied","wire_code":115}; a collision 409
// MemberExists (116); a snapshot too soon 429 SnapshotTooSoon (117).
package server
