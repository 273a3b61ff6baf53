// Package client is latch's Go client: Dial a cluster, read and write the
// namespace, watch it, and hold sessions whose ephemeral nodes and locks
// live as long as the session does.
//
//	c, err := client.Dial(ctx, client.Config{Endpoints: []string{"10.0.0.1:7420", "10.0.0.2:7420"}})
//	if err != nil { ... }
//	defer c.Close()
//	p, err := c.Create(ctx, "/workers/w-", nil, client.Ephemeral(), client.Sequential())
//	data, stat, err := c.Get(ctx, "/config")
//	w, err := c.Watch(ctx, "/config", client.Data())
//	for ev := range w.Events() { ... }
//
// Every blocking call takes a context first; options are functional and
// typed per call (client.Ephemeral() does not compile on Get). Errors keep
// their identity across the wire: errors.Is(err, client.ErrNoNode) holds
// for the server's namespace.ErrNoNode, because client.ErrNoNode is that
// same value.
//
// # Connection and failover
//
// A Client keeps one QUIC connection to the leader (and one to a read
// member, below). To find the leader, the
// client first asks every endpoint at once with one datagram
// (session.Probe: no handshake) and completes the QUIC+TLS handshake with
// the member that answers it is the ready leader, then says Hello,
// resumes every live session (ResumeSession with the session's secret,
// 64 at a time), renews them at once, and re-opens every watch from the
// last revision it delivered. While members answer that they know no
// leader (an election runs) it asks again every 20ms; after 300ms of that,
// twice as long each time, up to 80-160ms (thousands of clients lose the
// leader at once, and their probes must not load the candidates through a
// long election). Endpoints that do
// not answer the probe at all (a firewall, an older server) are dialed
// one after another, each attempt starting when the previous one failed
// or after 250ms (Happy Eyeballs, RFC 8305). Requests issued meanwhile
// wait for the new connection, bounded by their context, and then
// complete; requests of a session that expired meanwhile fail with
// ErrSessionExpired.
//
// A dead or silent leader is noticed within FailureTimeout (300ms) while
// a call waits on it: a request in flight (a session renewal too), a lock
// wait, an election campaign, a barrier or semaphore wait. The client
// then pings the member (a QUIC datagram the member echoes) after a
// quarter of it without an echo and closes the connection when three
// quarters pass after an unanswered ping. An idle connection (sessions,
// held locks and open watches, nothing waiting) is watched by QUIC alone, within
// IdleFailureTimeout (10s): it pings after a third of it without hearing
// anything, which session renewals (every TTL/3) usually make needless.
// Each renewal is a waiting call, so a session never goes longer than
// TTL/3 plus FailureTimeout without noticing a dead leader. A member
// that answers ErrNotLeader naming the leader sends the call there, at
// most MaxRedirects times per leader named (a redirect loop), however
// many leader changes the call lives through; one that knows no leader
// makes the call pause and, after a few such answers, look elsewhere.
// Neither fails a call before its context ends.
//
// Errors no retry can fix fail waiting calls at once instead of at their
// deadline: ErrUntrusted (the member's certificate is not signed by a
// trusted CA), ErrCertRequired (the member wants a client certificate it
// trusts), ErrVersion, and, for a client that never connected,
// ErrNotListening (every endpoint refused for a second: nothing listens
// there).
//
// Reads, Sync and session requests are retried after a broken connection;
// writes (Create, Set, Delete, Multi, Txn) are not, because the first attempt
// may have been applied: they fail with ErrUnknownOutcome and the caller
// decides (read back, or retry knowing the write is idempotent). A write
// refused with ErrNotLeader or ErrNoLeader was not applied and is retried,
// and so is one that found its connection already closed before sending.
//
// # Follower reads and the client cache
//
// Stale reads, watches and Stale lock-queue reads go to a second
// connection, to a nearby member: Config.ReadEndpoints (nearest first),
// else the member that is not the leader and answers a probe fastest (a
// follower or learner), else the leader; Config.LeaderReads keeps them on
// the leader's connection. The connection is made the first time one is
// needed. Writes, linearizable reads, sessions and locks stay on the
// leader's.
//
// What a Stale read guarantees: it may miss writes other clients made a
// moment ago, but it is monotonic for the client: never older than any
// state the client already saw, whichever members answer. The client keeps
// the highest revision it saw in any answer (writes, reads, watch events;
// Client.Revision) and sends it as the read's MinRev; a member that has not
// applied it waits up to 100ms, then answers ErrBehind, and the client
// answers the read from the leader and gives that member up for 2s while
// it looks for another. Members answer reads with the exact revision of
// the state read (no batch is applied during the read), so the revision is
// a bound both ways. A client's own writes are therefore visible to its
// Stale reads at once (read-your-writes), and Sync raises the revision to
// the leader's.
//
// Cached (Get, Stat, Exists) answers from the client cache: Chubby's
// design, see cache.go. The leader invalidates a cached node on the
// connection's cache stream before it acknowledges a write that changes
// it, and a write of a node whose invalidations are still in flight waits
// for them too; so a cached read never returns a value older than a write
// that completed before the read began. The cache serves only within a
// lease the leader grants after confirming its leadership (at most the
// raft heartbeat timeout: no new leader can acknowledge a write before it
// ends), and is dropped whole when the connection to the leader changes or
// the stream ends. At most Config.CacheNodes nodes; CacheStats reports
// hits, misses, invalidations and memory.
//
// # Sessions
//
// Dial opens a default session (Client.Session); ephemeral creates on the
// Client use it. NewSession opens more on the same connection, as etcd
// separates leases from the client: Session.Create and Session.Multi make
// ephemerals owned by that session. All sessions are renewed by one
// keepalive loop at TTL/3; renewals due within TTL/12 of each other go
// together, in one KeepAlive message of up to 1024 sessions when the
// server announces session.FeatureKeepAliveBatch in its Hello, else one
// message per session. Session state comes from session.Tracker: Connected,
// Jeopardy (the lease ran out without an ack — the client may be cut off
// and the session may be dead), Reconnected, Expired. LeaseEnd is the
// proven end of the lease (send time of the newest acknowledged keepalive
// plus TTL), which lock recipes use to refuse to act on a lock they may no
// longer hold. A resume is not counted as a renewal: the member may not
// have renewed the lease; the keepalive sent right after it is.
// Without an ack a session is declared expired a TTL after its lease end,
// unless the client is reconnecting and members answer its probes (the
// leader may be refusing it for load, an election or a new leader's load
// may run): the cluster holds such sessions through its reconnect grace,
// and so does the client, two connection rounds past the last answer
// (past the wait a busy leader told it to make, when it did) and at most
// Config.ReconnectGrace past the plain grace (server/doc.go, "Reconnect
// storms"). A new session's lease counts from when the open that was
// answered left, however long the call waited for a connection before.
//
// Session.Close ends the session on the server (ephemerals vanish now:
// beyond the cluster setting max_lock_batch, default 1000, the rest in the
// leader ticks that follow at once);
// Session.Orphan only stops the keepalives and leaves the server to expire
// it after its TTL; its ephemerals and held locks stay until then, and
// lock-delay applies as after a crash. Client.Close closes every session it still keeps
// alive, like ZooKeeper's close: a process that exits cleanly releases its
// locks at once; Orphan sessions first to leave them to expire instead.
//
// # Watches
//
// Watch returns once the server registered the watch, so every change
// committed afterwards is delivered. A watch resumes after a reconnection
// from one revision before the last it delivered and skips the events of
// that revision it already delivered: a revision whose events were cut off
// mid-way by a broken stream is completed, and none is delivered twice.
// When the server no longer has the history (or the consumer was too slow
// and the server's buffer overflowed) the watch delivers EventResync and
// continues from the revision it names. Events() holds a bounded buffer; a
// consumer that stops reading stalls only its own watch. The context given
// to Watch bounds the watch's life, as in etcd.
//
// # Locks and recipes
//
// Locks are the server's (DESIGN.md, Locks): fair, hierarchical, shared or
// exclusive, with fencing tokens. The recipes hold them for a Session:
//
//	m := client.NewMutex(sess, "/jobs/nightly", client.WithLockDelay(2*time.Second))
//	if err := m.Lock(ctx); err != nil { ... }  // ctx bounds the wait
//	defer m.Unlock(ctx)
//	store.Write(m.Sequencer(), ...)            // or m.Token(); stop on <-m.Lost()
//
// RWMutex adds shared holds, TryLock fails fast with ErrLocked, Election
// (Campaign, Proclaim, Leader, Observe, Resign, Term) is an exclusive lock
// whose request node holds the leader's value, Semaphore and Barrier are
// built on the namespace alone, and Client.CheckSequencer and
// Client.LockQueue read the lock state. Mutex.Contended (and
// RWMutex.Contended) closes when another session waits for the held lock
// (a watch with Locks, which any client may open to follow a lock's
// grants, ends and conflicting requests).
//
// Curator's recipes are built on the namespace too, and keep deciding
// once through lost answers (ErrUnknownOutcome) and failovers: Queue (a
// FIFO of persistent sequential items; a take is a Multi that deletes the
// item and creates an ephemeral marker of the consumer's session, so no
// item is taken twice and a lost answer is resolved), DoubleBarrier
// (Enter until n participants, Leave until all left; the ready node is
// created by a Multi that checks n participant nodes, so it releases all
// or none) and Counter (versioned sets; the node remembers its last 32
// writes' ids, so an Add whose answer was lost is found applied or not).
// See queue.go, doublebarrier.go and counter.go. A held lock costs no stream: the
// server tells of its end on the connection's lock notices stream, so
// Lost() closes as soon as the server takes the lock away or the session
// ends; after a failover the client re-attaches to its request (waiting or
// held) and keeps its place in the queue. A retried request carries its
// request id and finds the request already queued. A grant arriving
// after the session's LeaseEnd is refused with ErrLockLost. See mutex.go
// for the protocol, lockhandle.go and acquisition.go for the engine the
// recipes share.
//
// # Identity, rules and ownership
//
// The server knows a client by its TLS client certificate (CN, else URI
// SAN; none: the identity ""). Replicated ACL rules decide what an
// identity may read, write, create, delete or administer under a path
// prefix (Client.ACL, SetACL, RemoveACL; `latch acl`); a refusal is
// ErrPermissionDenied, naming the identity, the right and the path.
// Ephemeral nodes belong to their session: Client.Set and Client.Delete
// act as the default session, Session.Set and Session.Delete as that
// session, and another session's node can be changed or deleted only by
// an admin (the owner then loses it as on expiry: Lost fires). Names
// lock-x-NNNNNNNNNN and lock-s-NNNNNNNNNN are the lock code's
// (ErrReservedName).
//
// # Cells
//
// A namespace split into cells (latchd --cell NAME: cell NAME serves /NAME
// and below) is used through Cells (DialCells): it routes each request by
// its path's first component to that cell's Client, dialed the first time
// the cell is used, so a cell never used is never contacted. Each cell's
// Client keeps its own default session: locks in /a and /b are held by two
// sessions from one Cells. CheckSequencer asks the sequencer's cell (its
// Path). A multi whose ops name two cells and a watch on "/" fail with
// ErrCrossCell before anything is sent; a path of a cell missing from the
// map fails with session.ErrWrongCell, the error a member returns for a
// path of another cell.
//
// The cell map (cell name to client endpoints) starts from
// CellsConfig.Map; with MapCell it is replicated data of that cell, the
// JSON node CellMapNode(MapCell) written by PublishCellMap (or `latch
// cells publish`). The client reads it at DialCells and watches it; each
// change is read again and used for the next dial of a cell. The node's
// name is reserved: only an admin identity may write it (the cell's Apply
// decides), so clients never follow a map another identity wrote; a map
// that does not parse or lacks its own map cell is refused and the last
// good one kept. While the map
// cell is down the client keeps the last map it read (and the bootstrap
// map if it never read one); cells already dialed keep their connections,
// which follow their own members, whatever the map says.
//
// # Decisions not in DESIGN.md
//
//   - Delete with Recursive is done by the client, child by child, like
//     ZooKeeper's deleteall: it is not atomic. The version, if given, is
//     checked before anything is deleted and again on the node itself.
//   - Children follows pages until the end or Limit; pages are read at
//     different revisions.
//   - The client trusts only what Config.TLS says; with none, the system
//     roots and no certificate. No file in the working directory changes a
//     program's trust: finding `latchd --dev`'s CA is the CLI's own,
//     explicit feature (cmd/latch/dev.go).
//   - Silence is detected in two speeds (session/liveness.go). Fast
//     detection costs about eight datagrams per FailureTimeout (pings and
//     echoes), so it runs only while a call waits, when a failover is felt;
//     a connection that waits for nothing costs QUIC's keep-alive only
//     (none while renewals go by). Pinging every connection at
//     FailureTimeout/4 made 5,000 idle connections 130,000 packets/s at the
//     leader, which starved its raft heartbeats. The ping is a QUIC
//     datagram, not a request: no stream and no decoding on the server,
//     authenticated like the rest of the connection, and it is echoed by
//     the member's connection goroutine itself, so a slow leader that
//     still runs is not given up while a commit takes long. The
//     connection's lock notices stream and a Watch do not count as
//     waiting (they are subscriptions, held for as long as the client
//     likes, like held locks): after a failover a held lock's end is
//     noticed, and a watch resumes, within IdleFailureTimeout or with the
//     next renewal, as ZooKeeper's watches resume with the session's
//     reconnection. A watch that a blocking call waits on (Barrier.Wait, a
//     semaphore's queue) counts as waiting. 5,000 clients with a fast-
//     pinged watch each would cost the leader about 130,000 packets/s.
//     A lock wait counts as waiting only while its request is next in
//     line (the member says so, session.FeatureLockNext): the waiters
//     behind it wait like subscriptions until their turn comes near, so
//     hundreds of queued clients do not ping the leader every 75 ms.
package client
