package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
)

// The membership changes behind `latch member` (package admin serves the
// routes): add as a learner, promote. Adding a voter is AddMember, removal
// RemoveMember (membership.go).

// ErrNotLearner is the answer to promoting a member that is not a learner
// in the raft configuration.
var ErrNotLearner = errors.New("latch: not a learner")

// AddLearner adds id at raftAddr as a non-voter (a learner): it receives
// the log but does not vote or count for commits until Promote. Leader
// only. Adding a learner that is already one is a no-op; a voter of that
// id is refused (remove it first).
func (s *Server) AddLearner(ctx context.Context, id, raftAddr string) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if id == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := checkDialable(raftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrBadRequest, err)
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	srv, ok, err := s.configured(id)
	if err != nil {
		return err
	}
	if ok && srv.Suffrage == raft.Voter {
		return fmt.Errorf("%w: %s is already a voter (remove it first to make it a learner)", ErrBadRequest, id)
	}
	if ok && srv.Address == raft.ServerAddress(raftAddr) {
		return nil
	}
	s.log.Info("adding learner", "id", id, "raft_addr", raftAddr)
	return s.proposeError(waitFuture(ctx, s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, s.cfg.ApplyTimeout)))
}

// Promote makes learner id a voter. Leader only; promoting a voter is a
// no-op.
func (s *Server) Promote(ctx context.Context, id string) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if id == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	srv, ok, err := s.configured(id)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", namespace.ErrNoMember, id)
	case srv.Suffrage == raft.Voter:
		return nil
	}
	s.log.Info("promoting learner", "id", id)
	return s.proposeError(waitFuture(ctx, s.raft.AddVoter(srv.ID, srv.Address, 0, s.cfg.ApplyTimeout)))
}

// configured returns id's entry in the current raft configuration.
func (s *Server) configured(id string) (raft.Server, bool, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, fmt.Errorf("latch: raft configuration: %w", err)
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == id {
			return srv, true, nil
		}
	}
	return raft.Server{}, false, nil
}
