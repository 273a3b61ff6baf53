package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/adminapi"
)

// Status is a member's view of itself and the cluster (adminapi.Status, the
// document GET /v1/status serves).
type Status = adminapi.Status

// Status reports this member's raft state, indexes and the members.
func (s *Server) Status() (Status, error) {
	if err := s.running(); err != nil {
		return Status{}, err
	}
	r := s.raft
	build := adminapi.ThisBuild()
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
		SnapshotRestores: s.fsm.Restores(),
		RaftAddr:         s.raftAddr,
		ClientAddr:       s.cfg.ClientAddr,
		HTTPAddr:         s.httpAddr,
		NoSpace:          s.disk.Refuse() != nil,
		Version:          build.Version,
		Build:            build,
		PID:              os.Getpid(),
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
