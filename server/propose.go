package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
)

// notLeader builds the redirect error from the leader this member can
// vouch for (followedLeader: none while the leader it followed is silent)
// and the replicated member metadata.
func (s *Server) notLeader() error {
	e := &NotLeaderError{}
	if id := s.followedLeader(); id != "" && id != s.cfg.ID {
		m := s.memberInfo(id)
		e.LeaderID, e.LeaderClientAddr, e.LeaderHTTPAddr = id, m.ClientAddr, m.HTTPAddr
	}
	return e
}

// Propose commits cmd through raft, stamped with the cluster time, and
// returns what applying it produced. Only the leader proposes; others return
// a *NotLeaderError. A command the namespace rejects still commits and comes
// back with Result.Err set; the returned error is for failures to commit.
func (s *Server) Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	if s.raft.State() != raft.Leader {
		return nil, s.notLeader()
	}
	if err := s.disk.Refuse(); err != nil {
		return nil, err
	}
	data, err := namespace.EncodeEntry(&namespace.Entry{Time: s.clock.Now(), Cmd: *cmd})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
		if timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	start := time.Now()
	f := s.raft.Apply(data, timeout)
	// Raft answers an apply future when the entry is applied, leadership
	// is lost or raft shuts down, with one exception: an entry still in
	// raft's buffered apply channel (BatchApplyCh) when raft shuts down is
	// never answered. So the wait also ends when the member stops, with an
	// unknown outcome, instead of holding Close forever.
	if err := s.waitApply(f); err != nil {
		s.metrics.proposed("error", start)
		if failed := s.Err(); failed != nil {
			// This member stopped serving while the entry was in flight;
			// it may have committed through the others.
			return nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, failed)
		}
		return nil, s.proposeError(err)
	}
	res, ok := f.Response().(*namespace.Result)
	if !ok || res == nil {
		s.metrics.proposed("error", start)
		return nil, fmt.Errorf("%w: %T", ErrBadResponse, f.Response())
	}
	if errors.Is(res.Err, namespace.ErrStorage) {
		// Committed, but this member could not apply it: the others do.
		s.metrics.proposed("error", start)
		return nil, fmt.Errorf("%w: committed but not applied here: %w", ErrUnknownOutcome, res.Err)
	}
	if res.Err != nil {
		s.metrics.proposed("rejected", start)
	} else {
		s.metrics.proposed("ok", start)
	}
	if s.front != nil {
		// Acknowledged only once every client cache holding a node it
		// changed dropped it (cache.go); nothing to wait for otherwise.
		if err := s.front.cache.waitWrite(ctx, res.Index); err != nil {
			return nil, fmt.Errorf("%w: applied, but client caches were not invalidated in time: %w", ErrUnknownOutcome, err)
		}
	}
	return res, nil
}

// waitApply waits for f until the member stops (ErrClosed then).
func (s *Server) waitApply(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-s.stop:
		return fmt.Errorf("%w: the member stopped while the entry was in flight", ErrUnknownOutcome)
	}
}

// waitFuture waits for f, or for ctx when it can be cancelled. Raft futures
// cannot be cancelled, so an abandoned wait leaves the entry to commit or not.
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) proposeError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return s.notLeader()
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before the entry was appended: safe to retry elsewhere.
		return s.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The entry may already be in the log.
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("latch: raft busy: %w", err)
	}
	return err
}
