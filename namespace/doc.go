// Package namespace is the vocabulary every side of latch shares: the
// client, the CLI, the session layer and the server speak it, and it
// imports no storage engine, so a client links no badger.
//
// It owns:
//   - paths and their validation (ValidatePath, Parent, Base, Join; one
//     spelling per name, pathspell.go);
//   - Stat, Event and EventType, LockNote, the lock history's LockEvent;
//   - Command, Op, CreateFlags, Compare, Member, Entry and the raft log
//     codec (EncodeEntry, DecodeEntry: hand-written in entrycodec.go and
//     entrydecode.go, byte for byte go-msgpack's reflection encoding
//     under EntryHandle);
//   - Result, BatchEntry and StateView, what applying a command gives;
//   - the sentinel errors (errors.go), which keep their identity across
//     the wire;
//   - ACL rules (Perm, ACLRule, ParseRules, ValidateRule);
//   - Limits, the cluster settings, with DefaultLimits and Validate;
//   - LockMode, Grant, LockInfo, SessionInfo, StateHash.
//
// The state machine that gives these words their meaning, with the badger
// layout, Apply, the lock queues, snapshots and integrity checks, is
// package namespace/store; its doc.go is the manual of every command.
// Package namespace/msgp writes and reads msgpack in go-msgpack's forms,
// for the hand-written codecs here and in session.
package namespace
