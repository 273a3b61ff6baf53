// Package namespace is latch's deterministic state machine: a command in,
// state (in badger) and events out. It owns paths, nodes, sessions as the
// namespace records them, cluster member metadata, and the badger layout.
// It has no raft, network, goroutines or clock: time enters only as the
// leader's stamp on each command, so the same log gives the same state and
// the same events on every member.
//
// # Use
//
// The server's raft FSM owns one Store:
//
//	s, err := namespace.Open(namespace.Config{Dir: dir, Logger: log})
//	// raft.FSM.Apply / BatchingFSM.ApplyBatch:
//	e, err := namespace.DecodeEntry(logEntry.Data) // ErrMalformed on garbage
//	results := s.ApplyBatch([]namespace.BatchEntry{{Index: logEntry.Index, Time: e.Time, Cmd: &e.Cmd}})
//	// results[i].Err, .Events (for the watch hub), .Path, .Stat, .Session
//	// raft.FSM.Snapshot: snap, _ := s.Snapshot(); Persist: snap.WriteTo(sink); Release: snap.Release()
//	// raft.FSM.Restore: s.Restore(r)
//
// The leader builds an Entry (its clock in Time, the Command) and proposes
// EncodeEntry(entry). Reads (Get, Stat, Exists, Children, Session,
// Sessions, Members) may run concurrently with ApplyBatch and see the
// state as of the last committed batch.
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
//   - DecodeEntry refuses fields it does not know: they come from a newer
//     version whose meaning this one would silently drop.
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
//	'x' "applied"/"clock" meta: last applied index, monotonic clock (BE)
//
// Values use a hand-written varint encoding: deterministic (no maps), and
// cheaper than reflection on the hot path. Lock queues will add their own
// key spaces.
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
// If a commit fails the store is broken: every later command fails with
// ErrStorage, and the server must stop. A Restore that fails after dropping
// the old state leaves the store broken until a Restore succeeds.
//
// # Adding ops (locks)
//
// Append Op and EventType values (never renumber), add fields at the end
// of Command with new short codec tags and omitempty, add a case to
// cmdCtx.apply and a file with the op functions. An op reads and writes
// only through cmdCtx (node, putNode, getRaw, putRaw, deleteRaw, emit), so
// failure atomicity, multi and batching come for free.
package namespace
