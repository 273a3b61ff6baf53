// Package raftnode holds the parts of a latch member that sit around
// hashicorp/raft: the state machine raft applies to, the stream layers
// raft's network runs on, the detectors that tell a dead or stalled
// member from a slow one, the guards that fail or hand over a member
// whose storage cannot be trusted, and the leadership tracker. Package
// server builds a member by wiring them (server.go, raftnet.go); no part
// here imports server or holds a member struct: each takes, when it is
// made, the functions and values it needs (a Config struct, or
// constructor arguments), or the small interface it declares (Observer,
// Proposer).
//
// # Parts
//
//   - FSM (fsm.go): the raft.BatchingFSM over the namespace store,
//     deliberately thin (decode, apply a batch, tell the Observer, track
//     the applied index for waiters). Snapshots are checked whole before
//     a restore drops the store's state (snapshotcheck.go). ApplyGen
//     (applygen.go) brackets each batch, so a read can tell whether a
//     batch applied around it was observed yet.
//   - Raft's network (transport.go), bottom up: TCPLayer, SeverLayer
//     (sever.go: closes every raft connection and the listener at once
//     on a storage stall), FaultLayer (faultlayer.go: refuses blocked
//     addresses, for partitions with Config.FaultInjection) and TLSLayer
//     (mutual TLS between member certificates, the handshake on first
//     use). NetConfig turns raft's pipelined replication off.
//   - Detectors: CrashDetector (crashdetect.go) campaigns at once when
//     the leader's raft port refuses connections after its connection
//     ended; its WatchStall (stalldetect.go) makes raft check a silent
//     leader on time; WatchWrites (stall.go) fails the member when a raft
//     log write does not return.
//   - Guards: DiskGuard (diskfull.go) refuses writes and holds the FSM
//     while the disk is below its reserve; HashChecker (hashcheck.go)
//     hashes the state at each applied OpHashCheck and compares it with
//     the other members'; HandOff (handoff.go) transfers leadership to a
//     member that can write, on a full disk or before a stop.
//   - Leadership (leadership.go): whether this member is the ready
//     leader, with subscribers. Follow makes it ready once raft elected
//     it, a barrier of its term committed (so every entry of earlier
//     terms is applied) and the server's Prepare (cluster settings, cell
//     root, first ACL rules) succeeded; WaitReady waits for that.
//   - Logging and metrics: NewHCLog (raftlog.go) routes raft's hclog
//     output into slog; RaftSink (raftmetrics.go) exports raft's own
//     go-metrics series to Prometheus without allocating per sample.
//
// # Use
//
// The server makes the parts in its open and starts their loops in its
// Start, in this order: the disk guard, hash checker and hand-over, then
// the FSM over them (FSMConfig.WaitSpace, FSMConfig.HashView); the
// stream layers and the crash detector, then raft's NetworkTransport
// over them (CrashDetector.SetTransport); once raft runs, SetRaft on the
// detector, the hand-over and the leadership tracker, and the loops
// (CrashDetector.Run, WatchStall, WatchWrites, DiskGuard.Loop,
// HashChecker.Loop, Leadership.Follow) as goroutines the member owns.
//
// What stays in the server is its wiring of these parts with the
// namespace, the fronts and the admin endpoint: a member's failure
// (storagefault.go: sever the network, hand over when it can, stop
// raft), what a new leader records before it is ready (FollowConfig.
// Prepare: the cluster settings, the cell root, the first ACL rules),
// proposals and linearizable reads, and membership (joins, removals and
// the member records, through the admin endpoint).
//
// # Errors
//
// ErrClosed, ErrBadResponse, ErrStateDiverged and ErrStorageStalled are
// the same values as the server's errors of those names;
// ErrNotRaftLeader becomes the server's NotLeaderError.
package raftnode
