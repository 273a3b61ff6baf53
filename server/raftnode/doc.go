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
//     leader (elected and its term's barrier applied), with subscribers.
//   - Logging and metrics: NewHCLog (raftlog.go) routes raft's hclog
//     output into slog; RaftSink (raftmetrics.go) exports raft's own
//     go-metrics series to Prometheus without allocating per sample.
//
// # Use
//
// The server makes the parts in its open and starts their loops in its
// Start, in this order: the disk guard and hash checker, then the FSM
// over them (FSMConfig.WaitSpace, FSMConfig.HashView); the stream layers
// and the crash detector, then raft's NetworkTransport over them
// (CrashDetector.SetTransport); once raft runs, SetRaft on the detector
// and the hand-over, and the loops (CrashDetector.Run, WatchStall,
// WatchWrites, DiskGuard.Loop, HashChecker.Loop) as goroutines the
// member owns. A member's failure (server's storagefault.go) severs the
// network, hands over when it can and stops raft: that, the membership
// loop and the leadership loop (which bootstraps the cluster settings
// and ACL rules) are the server's wiring of these parts with the
// namespace, the fronts and the admin endpoint.
//
// # Errors
//
// ErrClosed, ErrBadResponse, ErrStateDiverged and ErrStorageStalled are
// the same values as the server's errors of those names.
package raftnode
