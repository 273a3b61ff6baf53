package server

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// verifier coalesces raft.VerifyLeader calls: at most one round is in
// flight, and every caller that arrives while it runs shares the next round
// (a round that started before a caller arrived cannot vouch for it).
type verifier struct {
	mu       sync.Mutex
	inFlight bool
	next     *verifyRound
}

type verifyRound struct {
	done chan struct{}
	err  error
}

// verify returns when a VerifyLeader round that started after the call began
// has finished, with its result.
func (s *Server) verifyLeader(ctx context.Context) error {
	v := &s.verifier
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyRound{done: make(chan struct{})}
	}
	round := v.next
	if !v.inFlight {
		s.startVerifyLocked()
	}
	v.mu.Unlock()
	select {
	case <-round.done:
		return round.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startVerifyLocked launches the pending round. The goroutine ends when raft
// answers, which it always does (on shutdown with ErrRaftShutdown).
func (s *Server) startVerifyLocked() {
	v := &s.verifier
	round := v.next
	v.next = nil
	v.inFlight = true
	s.metrics.verifies.Inc()
	go func() {
		round.err = s.raft.VerifyLeader().Error()
		close(round.done)
		v.mu.Lock()
		v.inFlight = false
		if v.next != nil {
			s.startVerifyLocked()
		}
		v.mu.Unlock()
	}()
}

// LinearizableRead returns once this member's namespace reflects every write
// committed before the call: it confirms leadership with a quorum (shared
// with concurrent callers) and waits for the FSM to apply up to the commit
// index seen at the start. Followers return a *NotLeaderError.
func (s *Server) LinearizableRead(ctx context.Context) error {
	if err := s.running(); err != nil {
		return err
	}
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	commit := s.raft.CommitIndex()
	if err := s.verifyLeader(ctx); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return s.notLeader()
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return ErrClosed
		}
		return err
	}
	return s.fsm.WaitApplied(ctx, s.stop, s.lastCommandAtOrBelow(commit))
}

// lastCommandAtOrBelow returns the index of the last entry at or below index
// that changes the namespace. Raft never hands no-op and barrier entries to
// the FSM, so waiting for the applied index to reach such an entry could
// wait for the next write; waiting for the last command before it is enough.
func (s *Server) lastCommandAtOrBelow(index uint64) uint64 {
	applied, _ := s.fsm.Applied()
	var l raft.Log
	for i := index; i > applied; i-- {
		if err := s.logs.GetLog(i, &l); err != nil {
			// Compacted: it is inside a snapshot, which the FSM holds.
			return applied
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return applied
}

// caughtUp reports whether the FSM has applied every command raft on this
// member knows to be committed.
func (s *Server) caughtUp() bool {
	applied, _ := s.fsm.Applied()
	return applied >= s.lastCommandAtOrBelow(s.raft.CommitIndex())
}
