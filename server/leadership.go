package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
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
func (s *Server) IsLeader() bool {
	ready, term, _ := s.leader.Get()
	return ready && s.raft != nil && s.raft.State() == raft.Leader && s.raft.CurrentTerm() == term
}

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

// leadershipLoop follows raft's leadership and makes this member ready after
// a barrier when it wins. Observations can be dropped, so it also
// reconciles on a ticker.
func (s *Server) leadershipLoop() {
	tick := time.NewTicker(s.cfg.HeartbeatTimeout / 2)
	defer tick.Stop()
	for {
		s.reconcileLeadership()
		select {
		case <-s.stop:
			return
		case <-s.obsCh:
		case <-tick.C:
		}
	}
}

func (s *Server) reconcileLeadership() {
	r := s.raft
	ready, term, _ := s.leader.Get()
	if r.State() != raft.Leader {
		if ready {
			s.leader.Set(false, 0)
			s.log.Info("lost leadership", "term", term)
			s.member.wake()
		}
		if _, lid := r.LeaderWithID(); lid != s.member.lastLeader() {
			s.member.wake()
		}
		return
	}
	cur := r.CurrentTerm()
	if ready && term == cur {
		return
	}
	// A barrier commits an entry of this term and waits until the FSM has
	// applied everything before it.
	start := time.Now()
	err := r.Barrier(s.cfg.ApplyTimeout).Error()
	if err != nil || r.State() != raft.Leader || r.CurrentTerm() != cur {
		if err != nil {
			s.log.Warn("leader barrier failed", "term", cur, "err", err)
		}
		if ready {
			s.leader.Set(false, 0)
		}
		return
	}
	// A cluster without settings gets this member's before any client
	// command runs under the built-in defaults, and a cluster without ACL
	// rules its first rules before any client command runs unchecked.
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyTimeout)
	err = s.bootstrapLimits(ctx)
	if err == nil {
		// Before the ACL bootstrap, so that the first rules do not stand in
		// its way; a failure only leaves clients to create the root.
		if cerr := s.bootstrapCell(ctx); cerr != nil {
			s.log.Warn("creating the cell root failed", "term", cur, "err", cerr)
		}
		err = s.bootstrapACL(ctx)
	}
	cancel()
	if err != nil {
		s.log.Warn("recording cluster settings or ACL bootstrap failed; retrying", "term", cur, "err", err)
		if ready {
			s.leader.Set(false, 0)
		}
		return
	}
	s.leader.Set(true, cur)
	s.log.Info("leader ready", "term", cur, "barrier", time.Since(start), "applied_index", s.fsmApplied())
	s.member.wake()
}

// waitReady waits until this member is the ready leader, or returns a
// NotLeaderError when raft says it is not the leader at all.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		ready, term, readyC := s.leader.Get()
		if s.raft.State() != raft.Leader {
			return s.notLeader()
		}
		if ready && s.raft.CurrentTerm() == term {
			return nil
		}
		select {
		case <-readyC:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return ErrClosed
		case <-time.After(s.cfg.HeartbeatTimeout / 4):
			// Re-check raft's state: it may have stepped down meanwhile.
		}
	}
}

func (s *Server) fsmApplied() uint64 {
	i, _ := s.fsm.Applied()
	return i
}
