// Package raftstore keeps a cluster member's Raft log and stable state,
// implementing raft.LogStore and raft.StableStore. Members use the WAL
// (hashicorp/raft-wal); the badger Store is what older members wrote and
// what OpenWAL migrates from.
//
// Use it as
//
//	st, err := raftstore.OpenWAL(raftstore.WALConfig{Dir: filepath.Join(dataDir, "raft-wal"),
//		MigrateFrom: filepath.Join(dataDir, "raft")})
//	...
//	logs, _ := raft.NewLogCache(512, st)
//	r, err := raft.NewRaft(conf, fsm, logs, st, snaps, trans)
//	...
//	st.Close() // after raft.Shutdown
//
// # Why the WAL
//
// Every raft commit waits for the leader's append and then a follower's,
// each fsynced, so the append is on the critical path of every write. The
// badger Store paid for an LSM memtable insert and msyncs of badger's
// memory-mapped files per append (about 1.6 msyncs per raft entry on a
// loaded leader; 4,004 msyncs for 2,000 single-entry appends under
// `strace -f -c` of the benchmark below); raft-wal writes one batch as one
// framed, CRC-protected append to a segment file and fsyncs it once
// (2,003 pwrites and 2,003 fsyncs for the same 2,000 appends).
// `go test ./server/raftstore -run XXX -bench StoreLogs -benchtime 2000x`,
// 100-byte entries, same run, 2 shared cores, load ≈ 1:
//
//	batch   badger Store       WAL
//	1       0.17–0.19 ms       0.10–0.11 ms
//	16      0.24–0.26 ms       0.13–0.14 ms
//
// and at load 11 (other builds running) 0.64 vs 0.50 ms and 1.31 vs 1.01
// ms, with 37 vs 9 allocations per single-entry append. End to end
// (`latch bench lock|create` against 3 real members, old and new builds
// alternated in one run at load 6–8) acquire p50 went from 1.58–1.63 ms to
// 1.33–1.36 ms and create p50 from 1.41–1.52 ms to 1.20–1.26 ms.
//
// Durability is the same as before: StoreLogs returns only after the batch
// is written and fsynced (and a torn tail batch fails its CRC and is cut
// off on open), so an entry raft acknowledged survives SIGKILL; the
// namespace FSM may lag behind the log and catches up by replay.
//
// # Verified entries
//
// raft-wal (v0.4.1) does not protect what it serves. Each append batch
// ends in a commit frame holding a CRC-32C of the batch, but that CRC is
// checked once: when the tail (unsealed) segment is recovered at open, and
// only for the last batch, whose mismatch is taken for a torn write and the
// batch dropped. Sealed segments are never checked, and GetLog checks
// nothing: it decodes whatever bytes the frame holds. So bytes flipped
// inside any entry but the tail's last batch reopen without an error and
// are applied, served and replicated as they are (issue 27; raft-wal's
// README leaves latent corruption to the file system). Its Codec option
// cannot carry a checksum either: v0.4.1 writes every new segment's codec
// as its built-in one and then refuses to reopen a log under any other.
//
// So the WAL seals every entry itself (checksum.go): StoreLogs appends a
// 6-byte trailer to the entry's Extensions, a CRC-32C over index, term,
// type, AppendedAt, Data and the caller's Extensions, and GetLog verifies
// and strips it on every read. A mismatch, a missing trailer, an entry
// that holds another index, or a frame raft-wal cannot parse is
// ErrCorruptLog naming the index and the segment file; the entry is not
// returned (so raft neither applies nor sends it: its replication gives
// up on that follower, and its apply loop would panic) and Failed is
// closed, on which the server fails the member (server/storagefault.go).
// OpenWAL reads and verifies every entry before it returns, so a member
// refuses to start on a damaged log, and latchd says which entry and file.
// That read costs a member's start time: `go test ./server/raftstore -run
// XXX -bench OpenWAL -benchtime 10x` opens 18,432 entries of 256 bytes
// (the most a member keeps with the default snapshot settings) in
// 0.35-0.85 s against 0.06 s without the check, on 2 cores at load 16-22
// (raft-wal reads 64 KiB per GetLog; the checksums themselves are a few
// percent). An append costs 3 more allocations per batch and 2 per entry
// (`-bench StoreLogs`: 12 vs 9 allocations for one entry); its time is
// the fsync's.
//
// Logs written before checksums: the first open records (stable key
// latch.raftlog.checksummed_from) the first index that will carry a
// trailer; entries below it are served as read until compaction removes
// them. Migration from the badger Store writes through StoreLogs, so a
// migrated log is checksummed whole.
//
// What this does not catch: damage to the frame headers of the tail
// segment makes raft-wal's recovery stop at the damaged frame (it takes it
// for a torn write) and drop the entries after it, as it drops a tail
// batch whose CRC fails. The member then starts with a shorter log, which
// raft refills from the leader; the entries it had acknowledged are lost
// on that member only, as they would be on a disk that lied about fsync.
//
// The WAL keeps raft's stable keys (term, vote) in a small bbolt file next
// to its segments. OpenWAL takes an exclusive flock on the directory (bbolt
// would wait forever for a second process) and the WAL's Close also closes
// that file (raft-wal v0.4.0's own Close left it open, so a member could
// not reopen its WAL in the same process; v0.4.1 closes it too, and a
// second close is a no-op).
//
// # Migration
//
// OpenWAL with MigrateFrom naming a badger Store copies its log and stable
// keys into an empty WAL, then removes the Store. The removal is the commit
// point: a crash before it leaves the Store, and the next start copies
// again from scratch. raft's uint64 stable keys (CurrentTerm,
// LastVoteTerm) are copied as numbers, since the Store wrote them
// big-endian and the WAL reads them little-endian.
//
// # The badger Store
//
// Durability: the database is opened with SyncWrites, so every StoreLogs, DeleteRange and
// stable Set returns only after its badger transaction is fsynced: an entry
// raft acknowledged survives SIGKILL. This store is the durable record of the
// member; the namespace FSM may lag behind it and catch up by replay.
//
// Layout: log entries live under the prefix "l" followed by the index as a big-endian
// uint64, so key order is index order and FirstIndex/LastIndex are one
// iterator seek each (done once at Open and then tracked in memory). Stable
// keys live under the prefix "s" followed by raft's key bytes; uint64 values
// are 8 big-endian bytes.
//
// A log entry's value is a compact binary record (see codec.go): a version
// byte, then index, term, type, AppendedAt (unix nanos, 0 for the zero time)
// as varints and Data and Extensions as length-prefixed bytes.
//
// Decisions:
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
