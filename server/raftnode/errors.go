package raftnode

import "errors"

// Errors of the raft member's parts. The server package returns the same
// values (server.ErrClosed, server.ErrBadResponse), so errors.Is matches
// either name.
var (
	// ErrClosed: the member stopped while a caller waited.
	ErrClosed = errors.New("latch: server closed")
	// ErrBadResponse means the state machine answered something other than
	// a *namespace.Result: a bug, reported rather than panicking.
	ErrBadResponse = errors.New("latch: unexpected apply response")
	// ErrStateDiverged: a majority of the members hashed their state at an
	// index differently from this member (hashcheck.go).
	ErrStateDiverged = errors.New("latch: this member's state diverged from the cluster's")
	// ErrNotRaftLeader: raft does not lead on this member
	// (Leadership.WaitReady); the server answers a NotLeaderError.
	ErrNotRaftLeader = errors.New("latch: not the raft leader")
	// ErrStorageStalled: a raft log write did not return within the stall
	// timeout (stall.go); the member failed.
	ErrStorageStalled = errors.New("latch: storage stopped answering")
)
