package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hashicorp/raft"
)

// Status is a member's view of itself and the cluster.
type Status struct {
	ID               string         `json:"id"`
	State            string         `json:"state"` // Follower, Candidate, Leader, Shutdown
	Ready            bool           `json:"ready"` // leader whose term barrier committed
	LeaderID         string         `json:"leader_id"`
	LeaderRaftAddr   string         `json:"leader_raft_addr"`
	Term             uint64         `json:"term"`
	AppliedIndex     uint64         `json:"applied_index"`
	CommitIndex      uint64         `json:"commit_index"`
	LastLogIndex     uint64         `json:"last_log_index"`
	SnapshotIndex    uint64         `json:"snapshot_index"`
	SnapshotRestores uint64         `json:"snapshot_restores"` // snapshots installed since start
	RaftAddr         string         `json:"raft_addr"`
	ClientAddr       string         `json:"client_addr"`
	HTTPAddr         string         `json:"http_addr"`
	Members          []MemberStatus `json:"members"`
}

// Status reports this member's raft state, indexes and the members.
func (s *Server) Status() (Status, error) {
	if err := s.running(); err != nil {
		return Status{}, err
	}
	r := s.raft
	addr, lid := r.LeaderWithID()
	st := Status{
		ID:               s.cfg.ID,
		State:            r.State().String(),
		Ready:            s.IsLeader(),
		LeaderID:         string(lid),
		LeaderRaftAddr:   string(addr),
		Term:             r.CurrentTerm(),
		AppliedIndex:     s.fsmApplied(),
		CommitIndex:      r.CommitIndex(),
		LastLogIndex:     r.LastIndex(),
		SnapshotRestores: s.fsm.restores.Load(),
		RaftAddr:         s.raftAddr,
		ClientAddr:       s.cfg.ClientAddr,
		HTTPAddr:         s.httpAddr,
	}
	st.SnapshotIndex, _ = strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64)
	members, err := s.Members()
	if err != nil {
		return st, err
	}
	st.Members = members
	return st, nil
}

// Snapshot takes a raft snapshot now (which also lets raft truncate its
// log). Having nothing new to snapshot is not an error.
func (s *Server) Snapshot(ctx context.Context) error {
	if err := s.running(); err != nil {
		return err
	}
	err := waitFuture(ctx, s.raft.Snapshot())
	switch {
	case err == nil, errors.Is(err, raft.ErrNothingNewToSnapshot):
		return nil
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("latch: snapshot: %w", err)
}
