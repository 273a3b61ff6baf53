package server

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// leadership tracks whether this member is a ready leader: raft elected it
// AND a barrier committed in its term, so every entry of earlier terms is
// applied. Only then may it serve linearizable reads or report leadership to
// subscribers (the lease table renews every session on a true).
type leadership struct {
	mu     sync.Mutex
	ready  bool
	term   uint64        // term in which ready was reached
	readyC chan struct{} // closed when ready becomes true; replaced when it drops
	subs   map[int]chan bool
	nextID int
}

func (l *leadership) init() {
	l.readyC = make(chan struct{})
	l.subs = map[int]chan bool{}
}

// set records a transition and tells subscribers.
func (l *leadership) set(ready bool, term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ready == l.ready && term == l.term {
		return
	}
	if l.ready && ready {
		// A new term without an observed step-down: subscribers still
		// need to see the loss, or they keep state from the old term.
		l.publish(false)
	}
	l.ready, l.term = ready, term
	if ready {
		close(l.readyC)
	} else {
		l.readyC = make(chan struct{})
	}
	l.publish(ready)
}

// publish delivers v to every subscriber, replacing an unread older value:
// subscribers want the latest state, not a backlog.
func (l *leadership) publish(v bool) {
	for _, ch := range l.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

func (l *leadership) get() (ready bool, term uint64, readyC <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready, l.term, l.readyC
}

func (l *leadership) subscribe() (<-chan bool, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan bool, 1)
	ch <- l.ready
	id := l.nextID
	l.nextID++
	l.subs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.subs, id)
			l.mu.Unlock()
		})
	}
}

// closeAll tells subscribers leadership is gone for good on Close.
func (l *leadership) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ready {
		l.ready = false
		l.readyC = make(chan struct{})
		l.publish(false)
	}
}

// SubscribeLeadership returns a channel that holds whether this member is
// the ready leader, now and after every change (true once per term won,
// after the term's barrier committed; false when it is lost). Slow readers
// see only the latest value. cancel stops delivery; the channel is never
// closed.
func (s *Server) SubscribeLeadership() (<-chan bool, func()) {
	return s.leader.subscribe()
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
	ready, term, _ := s.leader.get()
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
	ready, term, _ := s.leader.get()
	if r.State() != raft.Leader {
		if ready {
			s.leader.set(false, 0)
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
			s.leader.set(false, 0)
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
			s.leader.set(false, 0)
		}
		return
	}
	s.leader.set(true, cur)
	s.log.Info("leader ready", "term", cur, "barrier", time.Since(start), "applied_index", s.fsmApplied())
	s.member.wake()
}

// waitReady waits until this member is the ready leader, or returns a
// NotLeaderError when raft says it is not the leader at all.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		ready, term, readyC := s.leader.get()
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
	i, _ := s.fsm.appliedIndex()
	return i
}
