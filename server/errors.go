package server

import (
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/raftnode"
	"github.com/latch-io/latch/session"
)

// Errors returned by the server. Match them with errors.Is.
var (
	ErrBadConfig = errors.New("latch: bad server config")
	ErrNotLeader = errors.New("latch: not the leader")
	ErrClosed    = raftnode.ErrClosed
	// ErrNotStarted is returned by calls that need raft before Start.
	ErrNotStarted = errors.New("latch: server not started")
	// ErrBadResponse means the state machine answered something other than
	// a *namespace.Result: a bug, reported rather than panicking.
	ErrBadResponse = raftnode.ErrBadResponse
	// ErrUnknownOutcome is returned by Propose when leadership was lost or
	// ctx ended after the entry was handed to raft: it may still commit.
	// It is the wire's session.ErrUnknownOutcome, so a client sees the same
	// error whether its connection broke or the leader lost the write.
	ErrUnknownOutcome = session.ErrUnknownOutcome
	ErrJoin           = errors.New("latch: join failed")
	// ErrStateDiverged: a majority of the members hashed their state at an
	// index differently from this member (raftnode/hashcheck.go).
	ErrStateDiverged = raftnode.ErrStateDiverged
	// ErrMemberFailed: this member met a storage fault or found its state
	// diverged, and stopped serving (storagefault.go). It is a
	// namespace.ErrClosed on the wire, so clients go to another member.
	ErrMemberFailed = fmt.Errorf("%w: this member failed (storage fault or state divergence) and stopped serving; use another member", namespace.ErrClosed)
	ErrBadRequest   = errors.New("latch: bad request")
	// ErrNoSpace is the refusal of a write on a member whose disk is full
	// (raftnode.DiskGuard).
	ErrNoSpace = session.ErrNoSpace
	// ErrStorageStalled: a raft log write did not return within
	// Config.StorageStallTimeout (raftnode/stall.go); the member failed.
	ErrStorageStalled = raftnode.ErrStorageStalled
)

// NotLeaderError says this member is not the leader and names the leader
// when one is known, so a caller can redirect. It matches ErrNotLeader.
type NotLeaderError struct {
	LeaderID         string // "" when no leader is known
	LeaderClientAddr string // "" when unknown
	LeaderHTTPAddr   string // "" when unknown
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return ErrNotLeader.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%s (leader %s at %q)", ErrNotLeader.Error(), e.LeaderID, e.LeaderClientAddr)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
