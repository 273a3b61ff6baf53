package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/raftnode"
)

// SubscribeLeadership returns a channel that holds whether this member is
// the ready leader, now and after every change (true once per term won,
// after the term's barrier committed; false when it is lost). Slow readers
// see only the latest value. cancel stops delivery; the channel is never
// closed.
func (s *Server) SubscribeLeadership() (<-chan bool, func()) {
	return s.leader.Subscribe()
}

// followLeadership runs lead for every term this member is the ready
// leader, until stop. lead returns when stop closes or the term ends,
// saying whether this member leads again (a new term) by then.
func (s *Server) followLeadership(stop <-chan struct{}, lead func(stop <-chan struct{}, sub <-chan bool) bool) {
	sub, cancel := s.SubscribeLeadership()
	defer cancel()
	leader := false
	for {
		if !leader {
			select {
			case <-stop:
				return
			case leader = <-sub:
			}
			continue
		}
		leader = lead(stop, sub)
	}
}

// IsLeader reports whether this member is the leader and has applied every
// entry of earlier terms.
func (s *Server) IsLeader() bool { return s.leader.IsLeader() }

// Leader returns the current leader's id and client address ("" when
// unknown).
func (s *Server) Leader() (id, clientAddr string) {
	if s.raft == nil {
		return "", ""
	}
	_, lid := s.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	m := s.memberInfo(string(lid))
	return string(lid), m.ClientAddr
}

// leadershipLoop follows raft's leadership (raftnode.Leadership.Follow):
// the membership loop hears of every change of leader or readiness, and
// a new leader records what a cluster needs before it is ready.
func (s *Server) leadershipLoop() {
	s.leader.Follow(raftnode.FollowConfig{
		Stop: s.stop, Observed: s.obsCh, Recheck: s.cfg.HeartbeatTimeout / 2,
		Ctx: s.ctx, Barrier: s.cfg.ApplyTimeout, Log: s.log,
		Prepare: s.prepareLeader,
		Follower: func(leader raft.ServerID, lost bool) {
			if lost || leader != s.member.lastLeader() {
				s.member.wake()
			}
		},
		Ready:   s.member.wake,
		Applied: s.fsmApplied,
	})
}

// prepareLeader runs after the barrier of a term won, before this member
// is ready: a cluster without settings gets this member's before any
// client command runs under the built-in defaults, and a cluster without
// ACL rules its first rules before any client command runs unchecked.
func (s *Server) prepareLeader(ctx context.Context, term uint64) error {
	err := s.bootstrapLimits(ctx)
	if err == nil {
		// Before the ACL bootstrap, so that the first rules do not stand in
		// its way; a failure only leaves clients to create the root.
		if cerr := s.bootstrapCell(ctx); cerr != nil {
			s.log.Warn("creating the cell root failed", "term", term, "err", cerr)
		}
		err = s.bootstrapACL(ctx)
	}
	if err != nil {
		return fmt.Errorf("recording cluster settings or ACL bootstrap: %w", err)
	}
	return nil
}

// waitReady waits until this member is the ready leader, or returns a
// NotLeaderError when raft says it is not the leader at all.
func (s *Server) waitReady(ctx context.Context) error {
	err := s.leader.WaitReady(ctx, s.stop, s.cfg.HeartbeatTimeout/4)
	if errors.Is(err, raftnode.ErrNotRaftLeader) {
		return s.notLeader()
	}
	return err
}

func (s *Server) fsmApplied() uint64 {
	i, _ := s.fsm.Applied()
	return i
}
