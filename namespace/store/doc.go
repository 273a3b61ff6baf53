// Package store is latch's deterministic state machine: a command in,
// state (in badger) and events out. It holds the badger layout and
// everything that reads or writes it: Apply, nodes and sessions as the
// namespace records them, cluster member metadata, the lock index and lock
// history, the ACL table, snapshots (and CheckSnapshot), the read cache,
// integrity checks and Dump. The words it speaks (paths, Command and its
// log codec, Stat, Event, Result, errors, ACL rules, Limits, LockMode) are
// package namespace's, which imports no badger, so clients never link
// storage.
// It has no raft, network, goroutines or clock: time enters only as the
// leader's stamp on each command, so the same log gives the same state and
// the same events on every member. It also owns the lock queues: fair,
// hierarchical, shared/exclusive locks with fencing tokens (see Locks).
//
// # Use
//
// The server's raft FSM owns one Store:
//
//	s, err := store.Open(store.Config{Dir: dir, Logger: log})
//	// raft.FSM.Apply / BatchingFSM.ApplyBatch:
//	e, err := namespace.DecodeEntry(logEntry.Data) // ErrMalformed on garbage
//	results := s.ApplyBatch([]namespace.BatchEntry{{Index: logEntry.Index, Time: e.Time, Cmd: &e.Cmd}})
//	// results[i].Err, .Events (for the watch hub), .Path, .Stat, .Session
//	// raft.FSM.Snapshot: snap, _ := s.Snapshot(); Persist: snap.WriteTo(sink); Release: snap.Release()
//	// raft.FSM.Restore: s.Restore(r)
//
// The leader builds a namespace.Entry (its clock in Time, the Command) and
// proposes namespace.EncodeEntry(entry). Reads (Get, Stat, Exists,
// Children, Session, Sessions, Members) may run concurrently with
// ApplyBatch and see the state as of the last committed batch; lock reads (Lock, LockQueue,
// CheckSequencer, NextTimer) see it as of the last applied command.
//
// The leader also proposes ticks: an OpNoop stamped with its clock
// whenever NextTimer says one is due (lock hold deadlines, lock-delay
// ends, grants left over from a full batch).
//
// After a restart Open resumes from the recorded applied index; raft
// replays the log from its last snapshot and ApplyBatch skips every entry
// at or below AppliedIndex with ErrAlreadyApplied, so nothing is applied
// twice (run raft with NoSnapshotRestoreOnStart).
//
// # Commands
//
//   - Every command, failed or not, records its index as the applied index
//     in the same badger transaction as its effects. A failed command
//     changes nothing else: not even the clock.
//   - The clock is max(stored clock, leader time), so ctime/mtime never go
//     backwards when leadership moves to a member with a slower clock.
//   - Indexes need only increase: raft's own entries leave gaps.
//   - Create needs an existing, persistent parent; sequential creates append
//     the parent's counter as %010d (the counter counts sequential creates
//     under that parent, starting at 0). A sequential path may end in "/",
//     making the number the whole name ("/q/" gives "/q/0000000000").
//   - Txn (txn.go) evaluates its compares, then runs its then or else
//     ops (create, set, delete, check, get) exactly as a multi runs its
//     ops; Result.Succeeded names the branch. See "Transactions" below.
//   - Multi applies Create, Set, Delete and Check ops in order against a
//     scratch overlay; later ops see earlier ones. Any other op inside a
//     multi is ErrBadCommand. On failure Result.Err wraps the failing op's
//     error ("multi op 2 (delete): ...") and only that op's Results entry
//     has Err set; the others are empty.
//   - Session ids are the index of their OpSessionOpen. Close and expire
//     delete the session's ephemerals and then the session, in one command;
//     events are Deleted + ChildrenChanged per ephemeral in path order, then
//     SessionClosed or SessionExpired. An expire batch skips sessions that
//     are gone (reported per id in Results) and still succeeds.
//   - Event.Session is the session for session events and the owner for
//     ephemeral node events, so the server can route without reading state.
//   - Paths: beyond DESIGN.md, every Unicode control character (Cc: C0, DEL
//     and C1) is refused, not only those below 0x20.
//   - Paths: one spelling per name (namespace's pathspell.go). A path must be in
//     Unicode NFC: /é written as e + U+0301 is refused with ErrBadPath
//     ("not in Unicode NFC"), never stored as a second /é. Refused, not
//     normalized: ValidatePath is the one gate every path goes through
//     (Apply, reads, watches, ACL prefixes, both fronts), so refusing
//     there holds everywhere at once, whereas normalizing would have to be
//     done identically by every front, and a client would see events and
//     listings under a path other than the one it sent (its cache and
//     watches keyed on its own spelling). Clients that take names from
//     people compose them first (golang.org/x/text/unicode/norm).
//     Invisible code points are refused too: format characters (Cf:
//     zero-width space and joiners, bidi controls such as RLO, the BOM,
//     soft hyphen), the other default-ignorable code points and
//     variation selectors; so emoji ZWJ sequences and VS16 are refused,
//     and so are names that need a zero-width (non-)joiner to be spelled
//     right (some Persian and Indic words): the price of a name being
//     what it shows.
//     Mixed scripts: a component may not mix letters of two of Latin,
//     Greek and Cyrillic, whose letters look alike ("pаypal" with a
//     Cyrillic а), as Unicode's moderately restrictive profile (UTS #39)
//     has it; refusing every mixture would refuse "東京-tokyo" or a Latin
//     prefix on a Japanese name, so any other mixture, digits and
//     punctuation included, is accepted, and so are components of
//     different scripts in one path. Whole-script look-alikes (an all
//     Cyrillic "рау") are not detected: that needs the confusables table,
//     and ACLs, which are by prefix, decide who may make names anyway.
//     The NFC tables are x/text's, fixed by go.mod: members of one
//     version agree. Upgrading: a node made under such a name before
//     this rule can no longer be named (every op on it is refused), and
//     a log that made one replays to a refusal on a member of this
//     version (the state hash check then stops that member); delete such
//     nodes before upgrading.
//   - DecodeEntry refuses fields it does not know: they come from a newer
//     version whose meaning this one would silently drop.
//   - EncodeEntry and DecodeEntry are hand-written (namespace's
//     entrycodec.go) but the log format is still go-msgpack's reflection
//     encoding under namespace.EntryHandle(), byte for byte
//     (FuzzEntryCodec); the reflection decoder reads what the hand decoder
//     declines.
//
// # Badger layout
//
// The first byte of a key is its space:
//
//	'n' parent 0x00 name  node: format byte, varint stat fields, sequential
//	                      counter, then the data. The root is 'n' 0x00.
//	                      A node's children are exactly the keys with prefix
//	                      'n' path 0x00, sorted by name: listing reads
//	                      only them.
//	's' id(8, BE)         session: TTL, open time, secret, identity
//	'e' id(8, BE) path    empty; one per ephemeral, so ending a session
//	                      reads only its own ephemerals
//	'm' member id         member addresses
//	'l' rev(8, BE)        lock request: mode, session, node, hold TTL,
//	                      lock-delay, grant (token, time, deadline),
//	                      phantom end; key order is queue order
//	'a' identity 0x00 prefix   ACL rule: rights (one byte)
//	'x' "applied"/"clock" meta: last applied index, monotonic clock (BE);
//	    "acl": format, default rights (present once ACLs are enforced);
//	    "limits": the cluster settings in force and their revision
//
// Values use a hand-written varint encoding: deterministic (no maps), and
// cheaper than reflection on the hot path.
//
// # Durability
//
// Badger runs with SyncWrites off. The raft log is the durable record: an
// FSM write lost in a crash is re-applied from the log, because the
// applied index is lost with it (they share a transaction). Syncing every
// FSM batch would double the fsyncs per commit for nothing. Sync (called by
// Snapshot) makes the state durable before raft may compact the log behind
// a snapshot.
//
// Badger is tuned small (16 MiB memtables, two of them, 16 MiB block
// cache, 64 MiB value log files, two compactors) because several stores run
// in one test process; node data above 4 KiB goes to the value log, and
// CollectGarbage reclaims its overwritten space.
//
// # Transactions
//
// ApplyBatch writes a batch in one badger transaction, committing early
// when it would outgrow badger's per-transaction limit (half of it is the
// budget). A command's writes go to an overlay first and reach the
// transaction only when the command succeeds. The one command whose writes
// are unbounded, ending a session with very many ephemerals, commits
// checkpoints while keeping the applied index at the previous entry: after
// a crash the log replays it and it finishes on the partly ended session,
// reaching the same final state (only the events of the replay are fewer).
// Ending sessions is the only command allowed to do this, because it is the
// only one that is safe to resume.
//
// Commands read through a read cache (readcache.go) of the records
// earlier commands read or wrote, kept equal to badger: flush updates it
// with the transaction, and a failed commit or a Restore empties it. It
// saves badger lookups, never changes an outcome, and never holds value-log
// data (whose checksums are checked on each read).
//
// If a commit fails the store is broken: every later command fails with
// ErrStorage, and the server must stop. A Restore that fails after dropping
// the old state leaves the store broken until a Restore succeeds.
//
// # Cluster settings
//
// Apply never reads a clock or a member's configuration: every number
// that shapes an outcome (which command fails, which request is granted
// and so which token it gets, how long a lock-delay lasts) is a cluster
// setting, a field of Limits, replicated through the log (settings.go):
//
//   - OpSetLimits{Limits: &l, Version: v} replaces the settings whole. v is
//     the revision of the settings it was based on (Store.LimitsRevision;
//     0 when no command ever set them) or AnyVersion; a stale v fails with
//     ErrBadVersion. The record ('x' "limits": the revision and the
//     settings, msgpack by field tag) is written with the command's
//     effects, so it is in snapshots, Dump and restarts like any state.
//   - A change takes effect at the next command, in the same batch too;
//     reads see it once the batch commits (Store.Limits).
//   - Until a command sets them a store enforces Config.Limits, which a
//     replicated store leaves zero (DefaultLimits: a constant, the same on
//     every member). The server's first leader records its own configured
//     limits with Version 0 before it serves (server/settings.go), so a
//     cluster runs under the limits its founders were started with; later
//     members' flags are ignored (and logged) and an operator changes the
//     settings through the admin API (PUT /v1/limits).
//   - Request defaults resolve in Apply from the settings (a lock request
//     with LockDelayMillis 0 takes DefaultLockDelayMillis, capped at
//     MaxLockDelayMillis), so they are the same on every member; whatever
//     depends on a member instead (its clock) the leader writes into the
//     command before proposing it. The session TTL bounds
//     (MinSessionTTLMillis, MaxSessionTTLMillis) are settings the leader
//     applies when it opens a session: OpSessionOpen carries the TTL it
//     granted, so a later change of the bounds leaves open sessions be.
//
// To add a setting: add an integer field to Limits (latch limits handles
// settings as integers by json name) with a new codec tag and a json name, its default in DefaultLimits and its bounds in Limits.Validate,
// its tag in mpLimitsFields (namespace's entrycodec.go, sorted),
// and read it in Apply through cmdCtx.limits() (reads outside Apply use
// Store.Limits()). A record written before the field existed decodes with
// the default (records decode over DefaultLimits), so no migration is
// needed; a member that does not know the field refuses the command that
// carries it (DecodeEntry) instead of ignoring it. Give it a latchd flag
// only as a bootstrap value, next to --lock-delay.
//
// # Adding ops
//
// Append Op and EventType values (never renumber): ops after OpLockRenew
// are explicit constants in each workstream's range, with an opNames
// entry. Add fields at the end of Command with new codec tags (prefixed
// by area) and omitempty, and to the hand-written log codec in
// namespace's entrycodec.go (TestEntryCodecEveryField fails until then); add a case to
// cmdCtx.apply and a file with the op functions. An op reads and writes
// only through cmdCtx (node, putNode, getRaw, putRaw, deleteRaw, emit), so
// failure atomicity, multi and batching come for free.
//
// # Conditional transactions
//
// OpTxn{Compares, Ops (then), Else} is etcd's Txn in ZooKeeper's tree:
// each Compare reads one node's value (bytes, compared byte-wise),
// version, create or modify revision, ephemeral owner, or existence, with
// =, !=, > or < (existence with = and != against 1 or 0). When every
// compare holds the then ops run, else the else ops, against the
// command's overlay like a multi's (later ops see earlier ones), all or
// nothing. Decisions:
//   - A compare of anything but existence on a missing node is false,
//     whatever the operator: "version != 3" on a missing node does not
//     hold. Existence is the one way to ask about absence (etcd's
//     create_revision = 0 idiom is exists = 0 here).
//   - Every compare is evaluated and authorized (r on its path), even
//     after one failed; a compare that cannot be evaluated (bad path,
//     unknown target, an ordering of existence) fails the command.
//   - Both branches are checked for allowed ops before anything runs, and
//     then+else count together against MaxMultiOps (compares have their
//     own MaxMultiOps bound), so a bad txn fails whichever branch the
//     state picks.
//   - OpGet runs only in a txn: it reads through the overlay and fails
//     with ErrNoNode on a missing node (guard it with an exists compare).
//     A txn's gets return at most 1 MiB of data in all (one answer frame).
//   - A failing op fails the whole command, as in a multi: Result.Err
//     wraps it ("txn else op 1 (delete): ..."), Results has only that
//     op's Err, and Succeeded still names the branch that failed.
//   - ACLs and ownership are checked per op exactly as for the same op
//     alone, with the txn's identity and session.
//
// Multi is the special case with no compares and no else branch, without
// get; both run through one op runner (runOps).
//
// # Locks
//
// OpLockRequest{Path, Mode, Session, HoldTTLMillis, LockDelayMillis, Data}
// queues a request: an ephemeral sequential node Path/lock-x-NNNNNNNNNN
// (lock-s- when shared) owned by the session and holding Data, so
// "ls Path" shows the queue; Result.Path is the request node. Requests are
// ordered by the revision that created them. Two requests conflict when
// their paths are equal or one is an ancestor of the other, unless both
// are shared; a request is granted when no earlier conflicting request,
// held or waiting, remains. So the queue is FIFO across the whole
// hierarchy: a waiting parent holds back children requested after it, a
// waiting writer holds back later readers, and readers in a row are
// granted together. OpLockCancel{Path: node, Session} withdraws a request,
// waiting or held (then it is a release); OpLockRelease needs it held;
// OpLockRenew restarts a held lock's hold TTL; with HoldTTLMillis it sets
// a new hold TTL first, with TTLMillis a new TTL of the owning session
// (both in one command: the HTTP API's implicit leases change their TTL
// so). Lock ops are refused inside OpMulti.
//
// Grants happen inside Apply: Result.Grants lists them and each has an
// EventLockGranted (Path: the node, Session: the owner). The fencing token
// is the revision of the granting command, so it increases strictly per
// lock and globally; readers granted by one command share it.
// CheckSequencer(path, mode, token, session) tells a resource server
// whether that grant still holds.
//
// Decisions beyond DESIGN.md:
//   - A lock path that does not exist is created, with its missing
//     ancestors, as persistent nodes (events included), and left in place
//     afterwards, so /jobs/nightly can be locked on a fresh cluster. A
//     request node, or anything under an ephemeral, cannot be locked
//     (ErrEphemeralParent).
//   - No re-entrancy: a request that conflicts with a live request of its
//     own session (held or waiting) is refused with ErrWouldDeadlock and
//     creates nothing. A session may hold several shared requests on one
//     path. Deadlocks across sessions are the clients' to avoid (order
//     your locks, or use wait timeouts).
//   - Lock-delay applies when a holder is lost without releasing: its
//     session expires, its hold TTL passes (Chubby-like), or an admin
//     deletes its node (once ACLs are enforced; see ACLs and ownership). The request
//     stays in the queues as a phantom (granted, node gone, listed by
//     LockQueue and Dump, not by Lock) until leader time delay-end, and
//     conflicting requests wait for it. Release, cancel, session close and
//     an OpDelete of the node by its own session (or any, before ACLs are
//     enforced) apply none. The delay is the request's
//     LockDelayMillis, else the cluster setting DefaultLockDelayMillis (5 s
//     unless set otherwise), capped at MaxLockDelayMillis (60 s);
//     NoLockDelay turns it off.
//   - Events: a held lock that goes away reports EventLockReleased (release,
//     cancel, session close) or EventLockLost (session expiry, hold TTL,
//     OpDelete of its node), after the node's Deleted event, with the
//     hold's Token and Mode and its Cause in lock history's words
//     (Event.Lock). A waiter that leaves reports only the node's Deleted.
//     A request that its command leaves blocked reports EventLockContended
//     to each held request it conflicts with (Path and Session: the
//     holder; Lock.Waiter and Lock.WaiterSession: the new request), at the
//     revision that queued it; a
//     grant made while a conflicting request already waits reports one at
//     the grant's revision (lockcontended.go for the bounds).
//   - Timers (hold deadlines, lock-delay ends) fire only on OpNoop, in
//     (time, revision) order. A lock past its deadline cannot be renewed
//     (ErrLockNotHeld) but still holds until the tick removes it; the
//     leader proposes that tick at NextTimer. Renewing a lock without a
//     hold TTL succeeds and changes nothing.
//   - Bounded work: one command grants at most Limits.MaxLockBatch
//     requests (and about 256 KiB of records), and a tick fires at most as
//     many timers (about 256 KiB of writes); every successful command
//     carries on granting, in revision order, and NextTimer asks for a tick
//     at once while any is left. So releasing 20,000 readers, or 10,000
//     holds expiring together, never outgrows a badger transaction.
//   - A failed command changes no lock state. Ending a session ends it at
//     once but deletes at most MaxLockBatch of its nodes (and with them
//     its requests) per command: the close or expiry deletes the first,
//     each tick the next, NextTimer asking for ticks while any is left
//     (session.go); grants follow at the end of each command.
//
// The lock index (lockindex.go) is in memory, derived from the 'l' records
// and rebuilt by Open and Restore, badger staying the source of truth.
// Which requests are runnable but not yet granted is derived too, so a
// crash in the middle of a checkpointed session end resumes exactly. A
// release costs O(depth² + log n) plus a little per request it makes
// runnable (and per lock below it that was queued after it), independent
// of the waiters behind it and of unrelated locks.
//
// # ACLs and ownership
//
// Rules are by path prefix (Consul-style), not per node (ZooKeeper-style):
// ACLRule{Identity, Prefix, Perms} grants rights (r read, w write, c
// create, d delete, a admin) on Prefix and every node below it, prefixes
// matching whole components. Why prefixes: latch makes nodes on its own
// (lock paths and their ancestors, request nodes, sequential names), and
// a rule must cover nodes that do not exist yet; one rule governs a
// subtree, so changing who may touch /jobs is one command, ordered in the
// log with the operations it governs, instead of a walk over every node
// (ZooKeeper's per-node ACLs are not inherited, and getACL leaked its
// digests). The table is small and in memory: a check is one map lookup
// per ancestor.
//
// An identity's rights on a path come from its own most specific rule;
// without one, from the most specific rule of AnyIdentity ("*"); without
// that, from the default. So an identity's own rules beat the wildcard
// ones (an admin stays admin under "* /public r"), and an explicit "none"
// rule denies a subtree. Admin implies every right. The empty identity ""
// is clients without a certificate; a rule may name it.
//
// Enforcement starts with OpACLBootstrap{ACLDefault, ACL}: the server's
// first leader proposes it (the default and the --admins identities as
// admins of /) when it sees no rules; later ones change nothing. Before
// it, Apply behaves exactly as version 1 did (open, no owners, no
// reserved names), so a log written by version 1 replays to the same
// state. Apply never reads a flag: the flags only shape what the leader
// proposes. OpACLSet and OpACLRemove need admin on each rule's prefix and
// may not leave the tree without an admin of /.
//
// Once enforced, every client command is checked against its Identity:
// create and lock requests need c on the new node (the request node's
// rights are its lock path's), set w, delete d, check r; a multi checks
// each op with the multi's identity. A lock on / blocks every lock in the
// tree, so it needs admin on /. A lock on any path blocks every lock below
// it, so it needs c on the whole subtree: a rule of the caller's, or a
// wildcard rule that reaches it, that leaves it without c somewhere below
// the lock path (alice /team rwcd, alice /team/secret none) refuses the
// lock on /team with ErrPermissionDenied naming the carved-out prefix.
// Apply decides it from the rules in force at the request; a rule added
// later does not take back a lock already queued (remove it as an admin).
// Reads, listings and watches are checked by
// the server with Store.Authorize (r), against the rules of the last
// committed batch.
//
// Ownership is independent of the rules: an ephemeral node (lock request,
// election node, semaphore node, any ephemeral) may be changed or deleted
// only by its owner session (Command.Session) or an admin of its path.
// An admin's delete behaves as the owner's expiry would: EventLockLost,
// and lock-delay for a held lock. Names lock-x-NNNNNNNNNN and
// lock-s-NNNNNNNNNN are reserved for request nodes: a create of one, or a
// lock path with one as a component, fails with ErrReservedName (a
// hand-made one would collide with a later request's sequential name and
// make every later lock on its parent fail). A node named CellMapName
// (latch-cellmap) is a deployment's cell map, which clients route by:
// only an admin of it may create, set or delete it or anything below it
// (cellmap.go).
package store
