// Package raftstore keeps a cluster member's Raft log and stable state in one
// badger database, implementing raft.LogStore and raft.StableStore.
//
// Use it as
//
//	st, err := raftstore.Open(raftstore.Config{Dir: filepath.Join(dataDir, "raft")})
//	...
//	logs, _ := raft.NewLogCache(512, st)
//	r, err := raft.NewRaft(conf, fsm, logs, st, snaps, trans)
//	...
//	st.Close() // after raft.Shutdown
//
// # Durability
//
// The database is opened with SyncWrites, so every StoreLogs, DeleteRange and
// stable Set returns only after its badger transaction is fsynced: an entry
// raft acknowledged survives SIGKILL. This store is the durable record of the
// member; the namespace FSM may lag behind it and catch up by replay.
//
// # Layout
//
// Log entries live under the prefix "l" followed by the index as a big-endian
// uint64, so key order is index order and FirstIndex/LastIndex are one
// iterator seek each (done once at Open and then tracked in memory). Stable
// keys live under the prefix "s" followed by raft's key bytes; uint64 values
// are 8 big-endian bytes.
//
// A log entry's value is a compact binary record (see codec.go): a version
// byte, then index, term, type, AppendedAt (unix nanos, 0 for the zero time)
// as varints and Data and Extensions as length-prefixed bytes.
//
// # Decisions
//
//   - StoreLogs writes a batch in one transaction, committing early and
//     continuing in a new one only when badger reports the transaction too
//     big. A crash between the parts leaves a prefix of the batch, which raft
//     tolerates (it never acknowledged the batch).
//   - DeleteRange iterates keys only (no values) between the bounds and deletes
//     them in as few transactions as badger allows.
//   - Conflict detection is off: raft is the only writer and serializes its
//     writes, so tracking read sets would only cost memory and CPU.
//   - Memory is tuned down (16 MiB memtables, small caches, 64 MiB value log
//     files) because a test process runs several members. Values below the
//     value threshold (1 MiB) stay in the LSM tree, so compaction alone
//     reclaims deleted entries.
//   - Get on a missing stable key returns ErrKeyNotFound whose text is exactly
//     "not found": hashicorp/raft compares error strings to tell a missing key
//     from a failure, so this one error does not carry the "latch: " prefix.
package raftstore
