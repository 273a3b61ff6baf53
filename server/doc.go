// Package server runs one latch cluster member: hashicorp/raft over a
// write-ahead log and stable store (hashicorp/raft-wal, package raftstore), a thin raft FSM
// over the namespace state machine, membership, snapshots and the admin HTTP
// endpoint. Client-facing layers (the QUIC front, the request handlers,
// watches, leases) are built on the methods below. The parts around raft (the FSM,
// raft's stream layers, the crash, stall and storage detectors, the disk
// guard, the state hash check, the leadership hand-over and tracker) are
// package raftnode, which this package wires (server.go, raftnet.go).
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
//     leader's in-memory bookkeeping, never Apply's. So are the watch
//     byte caps (package watch: events held for watches counted as path + 48
//     bytes, per connection and in total) and the failed-resume limiter
//     (quicfront/resumelimit.go: token buckets of wrong-secret resumes per
//     connection and per client host; a right secret is never refused
//     on the host's account).
//   - Cells (cell.go): with Config.Cell a member serves /Cell and below
//     only. front.checkCell (the QUIC front's Requests.Check) refuses any request naming another path
//     (Path, Node, Sequencer.Path, each Multi op, each Txn compare and
//     op) with session.ErrWrongCell before its handler runs, on the QUIC front and for the HTTP API's
//     bodies; package httpapi refuses a route's {path...} the same way
//     before it is served or forwarded. The check is per-member config at
//     the front, never in Apply: every member of a cell has the same flag,
//     and what Apply decides still comes from the log alone. The leader
//     creates /Cell before it is ready (bootstrapCell).
//   - Leader readiness (raftnode.Leadership): after winning an election
//     the leader commits a barrier before IsLeader reports true,
//     SubscribeLeadership delivers true, or linearizable reads are
//     served. A term change without an observed step-down is delivered
//     as false then true.
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
//   - Locks (package locksvc, its doc.go the design: the one acquisition
//     engine, request or re-attach, wait, withdraw and outcome, that every
//     front drives through a locksvc.Caller saying how its caller learns
//     of the grant and how it goes away; the unary calls, the held locks
//     followed and their notices stream, the leader's ticks; it declares
//     what it needs of the member, which lock_member.go implements and
//     wires; lock_stream.go is the MsgLock stream's caller): a new request
//     comes as MsgLockCall on the mux stream, answered granted or queued at once; a
//     queued one is waited for on a MsgLock stream, woken only by its
//     own grant (waiters keyed by request node, fed by the apply
//     observer). The stream ends at the grant; a held lock's loss is told
//     on the connection's lock notices stream. A stream the client
//     resets on a live connection withdraws the request (or
//     releases the lock); a lost connection leaves it for the client to
//     re-attach with MsgLock{Node}. The ready leader proposes OpNoop ticks
//     when the namespace's NextTimer is due, so hold TTLs and lock-delays
//     end through the log. Lock-delay default and cap are the cluster
//     settings DefaultLockDelayMillis (5s) and MaxLockDelayMillis (60s).
//   - QUIC front (package quicfront, its doc.go the design): the client
//     listener on Config.ClientAddr, the connections, streams and mux
//     calls, the routing of every request to its handler, admission
//     control and its queue, the probe answers, the failed-resume limiter
//     and the shared ticket keys. It holds no request logic and does not
//     import this package: it declares what it needs (quicfront.Parts:
//     Leadership, Requests, TicketKeys), which front_member.go implements
//     over this member; front.go wires it (openFront) and holds the
//     handlers' side, the front struct (dispatch.go, dispatch_session.go
//     and each part's handlers, registered with handleUnary and
//     handleStream).
//   - HTTP/JSON API (package httpapi, its doc.go the design): a second
//     front on Config.APIAddr (HTTPS with the client front's certificate
//     and client CA) serving sessions, nodes, locks, elections, SSE
//     watches, an OpenAPI document (package apispec) and the web console
//     (package console). It holds no logic and does not import this
//     package: it declares what it needs (httpapi.Member), which
//     api_member.go implements over this member's parts: unary requests
//     run through the QUIC front's Call to its handlers; acquire through
//     the lock service's acquisition engine (package locksvc, with a
//     pollCaller); watches through the watch hub (package watch); every error leaves as
//     its wire error. api.go wires it: the listener, the http.Server, the
//     console's sampler (package consolestats, fed by statsSource) and
//     Config.APIGatewayCA.
//   - Admin endpoint (package admin, its doc.go the design): the HTTPS
//     routes on the admin address (status, membership, snapshots and
//     backups, settings, state hashes, ticket keys, pprof, faults). It
//     holds the HTTP handling only and does not import this package: it
//     declares what it needs (admin.Member, admin.Faults), which
//     admin_member.go implements over this member (Status, Members,
//     addMember, RestoreBackup, SetLimits, ...) and wires (adminHandler).
//   - Integrity: a storage fault in the namespace store, a raft log entry
//     that fails its checksum (raftstore/checksum.go: every entry is
//     checked on read, and the whole log before the member starts, which
//     it refuses on a damaged one), or a state hash
//     that a majority of members disagrees with (raftnode/hashcheck.go: the leader
//     proposes OpHashCheck every HashCheckInterval, every member hashes
//     that index and compares over the admin API), makes the member fail
//     (storagefault.go): it stops serving, hands off leadership (to a
//     member with space, raftnode/handoff.go), stops raft and closes Failed, on
//     which latchd exits 1.
//   - Disk full (raftnode/diskfull.go): below Config.MinFreeSpace free bytes the
//     member refuses proposals with ErrNoSpace and the FSM waits, instead
//     of badger dying with SIGBUS in a memory-mapped write; a leader in
//     that state hands leadership to the most up-to-date voter with space
//     (raftnode/handoff.go), so the cluster keeps serving.
//   - A disk that stops answering (raftnode/stall.go): a raft log write in flight
//     for longer than Config.StorageStallTimeout fails the member with
//     ErrStorageStalled; the member first closes its raft listener and
//     every raft connection itself (raftnode/sever.go: a process stuck in a frozen
//     file system cannot finish exiting), so the others see it die and
//     elect at once, then latchd exits.
//   - Restore (raftnode/snapshotcheck.go, backup.go): a backup, and every snapshot
//     raft installs, is checked whole by store.CheckSnapshot (checksum,
//     metadata, every lock request has its session and its own node)
//     before the store drops its state; a refused one changes nothing
//     (raft would panic on a user restore the FSM refuses).
//   - Time (package clock): the leader stamps entries with the cluster
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
// # No leader change without a failure
//
// A lock service is judged on its worst day: thousands of clients
// reconnecting at once after a failover or a deploy. latch's rule is that
// load never deposes a leader: the cluster keeps its leader as long as no
// member fails and the network between members works. Four mechanisms
// serve it; `latch bench storm` measures how far they go (README,
// Stability under load: at 4,000-5,000 clients connecting at once on one
// 2-core machine some clients still starve, and a reconnect storm of
// 3,000 after a crash is not yet absorbed).
//
//  1. Raft timing that load does not reach (DefaultConfig): heartbeat,
//     election and leader-lease timeouts of 500ms. With 100ms, a leader
//     busy with handshakes on a 2-core machine answered its followers
//     late, stepped down after 100ms without a quorum, and every client
//     then stormed the next leader, which was now the busy one: elections
//     without end. 500ms is five times the stalls measured under the
//     worst storms once admission control (2) bounds them.
//  2. Admission control (quicfront/admission.go) keeps the CPU raft needs: every
//     new client connection attempt is admitted or refused before any
//     cryptography (quic-go's ConnContext; a refusal is one
//     CONNECTION_REFUSED packet). Full handshakes pass a token bucket
//     (HandshakeRate, 400/s by default, about 40% of a core) whose rate
//     halves while the Go scheduler wakes a 10ms ticker late by more than
//     LagLimit (runnable goroutines, raft's among them, are waiting for a
//     CPU) and grows back by a tenth per quiet 100ms. A host whose
//     handshakes keep failing (no certificate) spends a per-host budget
//     and is refused before it costs a signature; leader probes are
//     limited per host. Clients take a refusal as "busy" and back off,
//     jittered, from 80ms (package client). Established clients are
//     never refused: keepalives, requests and raft traffic pass no gate.
//     Admitted handshakes must finish while their clients wait (a client
//     gives a silent handshake up after a second): the handshakes in
//     flight are bounded by what the member completed per second times
//     500ms, and an interval in which clients abandoned more than a
//     quarter of the handshakes that ended halves the rate.
//     The admission queue (quicfront/queue.go): the probe is the queue. A refused
//     attempt's CONNECTION_REFUSED is sent from a queue of four that
//     quic-go drops past, so most refused clients heard silence, could
//     not tell busy from dead and came back every second (after a kill of
//     a 3,000-session leader the new one refused 629,021 attempts while
//     admitting about 20/s, and 2,733 first calls failed within 60s). A
//     client about to dial now asks the leader in its probe, from the
//     socket it will dial from, "may I connect?", saying whether it
//     brings back live sessions. The rule: the leader answers with a slot
//     reserved for that source address on its token bucket's schedule
//     (the bucket goes into debt: a slot is when the bucket would hold
//     the reservation's token at its current rate), "come now" or "come
//     in W"; reconnects are scheduled ahead of every new session still
//     waiting, new sessions behind everything; a reconnect is queued at
//     most 3s ahead and a new session 1s, past that (or past 8,192
//     reservations held) the answer is "busy, ask again in W", which the
//     client trusts because it heard it. The reserved attempt is admitted
//     without a second charge; unreserved attempts (old clients, asks
//     that went unanswered) pass the bucket as before, so behind the
//     queue. Stability: the queue changes when clients come, not how
//     many handshakes a second the member admits (each reservation is
//     one token taken from the same AIMD bucket; jumping reconnects over
//     waiting new sessions admits at most those new sessions' tokens, 1s
//     of rate, beyond it), and its memory is bounded by count and age (a
//     reservation unused 2s past its slot is forgotten, its token not
//     given back). A dead leader still gives silence or an ICMP refusal
//     to the survey's probes, so failover is as fast as before: the ask
//     is one more datagram to the member that just answered as leader.
//  3. A failure detector that tells a dead leader from a slow one
//     (raftnode/crashdetect.go). A crashed leader's kernel closes its raft
//     connections and its raft port refuses new ones; a slow, stopped or
//     partitioned one does neither. A follower that reads EOF from the
//     leader's connection dials its raft port; "connection refused"
//     alone counts as death, and then the follower hands its own raft a
//     TimeoutNow (what a leadership transfer sends), so it campaigns at
//     once and the others vote without waiting out their timeouts
//     (survivors take turns by id, 60ms apart, so they do not split the
//     vote). Raft's rules on terms and logs are unchanged; only the wait
//     is skipped, and only for a member that cannot be serving.
//  4. Planned failover costs nothing: Close (SIGTERM) on a leader first
//     transfers leadership (raft.LeadershipTransfer) to an up-to-date
//     voter and closes its client connections with ConnNotLeader, so the
//     clients move while the member still answers probes (handOver,
//     raftnode.HandOff).
//
// Reconnect storms converge and lose nothing. After a leader change every
// client reconnects to the new leader, which admits them at the rate it
// can serve. The rule for their sessions, Chubby's grace period, has two
// halves, and a session is lost if either gives up first:
//
//   - The leader (package lease): a new leader gives every session a full
//     TTL plus a grace of twice the time admitting one connection per
//     session takes at HandshakeRate (reconnectGrace), and once its
//     admission control refused (or queued, or told busy) a client for
//     load it expires nothing while it is still taking clients in (it
//     refused, queued or told busy an attempt for load, or a handshake
//     ended, within 3s, or one is in flight or reserved: longer
//     than a refused client's way back, a 1s back-off behind a 1s silent
//     refusal), up to MaxReconnectGrace (45s) after it loaded the
//     sessions. In steady state, while it refuses clients for load (an
//     overloaded leader: a client whose keepalive went unanswered
//     reconnects and is turned away), a session expires only
//     MaxReconnectGrace past its deadline (expiryCutoff).
//   - The client (session.Tracker, client/discover.go): it declares a
//     session expired on its own a TTL after its lease end without an
//     ack (the plain grace), but while it is reconnecting and a member
//     answers its probes (the leader may be refusing it, an election or
//     a load may run) it holds the session at least two connection
//     rounds past the last answer, or past the end of the wait the
//     leader told it to make ("busy, ask again in W", a slot W ahead),
//     up to client.Config.ReconnectGrace (45s) past the plain grace.
//     (Held only from the answer, clients told to wait 9-18s by a
//     leader working through 1,000 reconnects gave their sessions up
//     in the middle of the wait.) Before
//     that half existed, clients gave their sessions up 17-20s after a
//     leader kill (10s TTL) while the new leader still held them: all
//     1,447 sessions lost of 2,000 in one storm were given up by their
//     own clients.
//
// So a client that is alive and trying is never expired because the
// leader was slow to take it back, as long as the storm is absorbed within
// MaxReconnectGrace. Safety bound: a dead client's session, its
// ephemerals and locks end at most TTL + MaxReconnectGrace (+ ExpiryTick)
// after the leader change (expiry is held for everyone while clients are
// being taken in, but never past MaxReconnectGrace after the load), and
// at most TTL after its last keepalive otherwise (TTL + MaxReconnectGrace
// while the leader refuses clients for load);
// the lock-delay still separates an expired holder from the next. A
// client's hold does not extend what it may do with a lock: LeaseEnd, the
// proven end of its lease, does not move.
//
// # Failover timing
//
// The chain a client feels when the leader dies, with its budget:
//
//  1. Members notice. A crash (SIGKILL, a panic, the host's kernel
//     killing it): at once, by the detector above (an EOF and a refused
//     dial, well under a millisecond on a LAN). A stopped or cut-off
//     leader: a follower starts a pre-vote once it heard nothing for
//     500ms (raft checks on a random 500ms-1s timer; the stall watch,
//     raftnode/stalldetect.go, makes it check as soon as the silence is that long,
//     the k-th ranked voter 60ms after the one before it); voters refuse
//     while they still have a leader, so the election completes once a
//     majority of the others timed out (0.5-0.6s).
//  2. Elect (a few ms): vote round trips, the vote fsynced; then the
//     leader commits its barrier (one fsync round), loads the lease table
//     and is ready. A follower names a leader (NotLeaderError, probe
//     answers) only while it heard from it within half a heartbeat
//     timeout and did not see it die, so clients are told "no leader
//     yet", never the dead one.
//  3. Clients notice (225-300ms, in parallel with 1-2): while a call
//     waits, the client pings (a QUIC datagram the member echoes, see
//     session.(*Conn).EchoPings) after a quarter of
//     client.Config.FailureTimeout (300ms) of silence and closes after the
//     rest (package client); idle connections only after
//     IdleFailureTimeout (10s).
//  4. Clients reconnect (a few ms each, admitted at HandshakeRate): they
//     probe every member at once with one datagram (quicfront/probe.go,
//     session.Probe), dial only the member that answers it is the ready
//     leader, say Hello and resume their sessions; while members answer
//     "no leader yet" they probe again every 20ms (less often after
//     300ms).
//  5. First grant (one commit): the holder's release, retried on the new
//     connection (a release is idempotent by request node), commits and
//     the grant goes to the next waiter, which re-attached to its request.
//
// Total for a crash: max(1-2, 3) + 4 + 5, about 0.3-0.4s; for a stopped or
// partitioned leader 0.6-0.8s. `latch bench failover` measures both
// (README, Failover).
//
// Safety with this timing:
//
//   - Session leases do not depend on raft timing. A new leader gives
//     every session a fresh full TTL from when it loads the table
//     (package lease), so a session never expires earlier than TTL after
//     its last acknowledged keepalive, whatever the number of elections.
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
//     the new leader's deadline. The crash detector's shortcut skips the
//     heartbeat timeout only when the old leader's raft port refuses
//     connections: its process is gone (or its raft shut down, which
//     Close and a storage fault do only after its client front stopped),
//     so it answers no keepalive at all. A paused leader (SIGSTOP) may
//     answer a keepalive that waited in its socket before raft's lease
//     check runs on resume; the client counts that lease from when it
//     sent it, so the overlap is at most the part of the pause after the
//     new leader loaded, and the lock-delay that separates an expired
//     holder from the next one is far longer.
//   - Lock-delay and hold TTLs are stamped by the leader into the log and
//     decided in Apply; the timing above does not change them.
//   - A starved follower that times out does not depose a healthy leader:
//     its pre-vote is refused by the members that still hear from the
//     leader.
//
// # Testing
//
// Package servertest starts in-process clusters (real badger, real raft
// over mutual TLS on loopback, or on an in-memory network the test
// partitions through Config.RaftLayer; optionally a clock the test
// moves, through Config.Clock and Config.Monotonic); package proc runs
// real latchd processes for crash tests (SIGKILL, SIGSTOP).
//
// # Member traffic (raftnet.go, raftnode/transport.go, auth.go)
//
// Raft runs on raft's NetworkTransport over a TLS stream layer (over the
// fault layer with FaultInjection, over TCP or Config.RaftLayer's layer): every connection is mutual
// TLS 1.3 between member certificates of Config.ClusterCA
// (session.MemberTLS), the handshake done on first use with a 10s bound,
// so an accepted connection never stalls raft's accept loop and a
// non-member never reaches raft. Replication is not pipelined (one
// AppendEntries in flight per follower, raftnode.NetConfig): raft's pipeline
// can deadlock its Shutdown. The admin endpoint is HTTPS only, with the
// member certificate; who may call what is decided per route from the
// verified client certificate (admin.Caller): a member (session.PeerMember)
// or an admin (Config.Admins, or Config.AdminCheck for admins from
// elsewhere; in Dev without Admins, any dev certificate). A member may only
// join, update or remove itself. Members call each other's admin endpoint
// (joins, address refreshes, "was I removed?") with their member
// certificate and accept only a member's. A join that takes a live
// member's id or raft address is ErrMemberExists unless an admin sends
// replace. Config.Recover runs raft.RecoverCluster before raft starts.
//
// # Admin HTTP (HTTPS; package admin serves it)
//
//	GET  /healthz      200 while the process runs and raft is not shut down
//	GET  /readyz       200 when a leader is known and this member applied all it knows committed
//	GET  /metrics      Prometheus text
//	GET  /v1/status    Status as JSON
//	GET  /v1/ticket-key member only: this member's TLS session ticket key (quicfront/ticketkeys.go)
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
