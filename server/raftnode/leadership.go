package raftnode

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Leadership tracks whether this member is a ready leader: raft elected it
// AND a barrier committed in its term, so every entry of earlier terms is
// applied. Only then may it serve linearizable reads or report leadership to
// subscribers (the lease table renews every session on a true).
type Leadership struct {
	mu     sync.Mutex
	ready  bool
	term   uint64        // term in which ready was reached
	readyC chan struct{} // closed when ready becomes true; replaced when it drops
	subs   map[int]chan bool
	nextID int

	raft atomic.Pointer[raft.Raft] // SetRaft
}

// NewLeadership returns the tracker of a member that does not lead.
func NewLeadership() *Leadership {
	l := &Leadership{}
	l.readyC = make(chan struct{})
	l.subs = map[int]chan bool{}
	return l
}

// Set records a transition (ready in term; false, 0 when lost) and tells
// subscribers.
func (l *Leadership) Set(ready bool, term uint64) {
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
func (l *Leadership) publish(v bool) {
	for _, ch := range l.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

// Get returns whether this member is ready, the term it became ready in,
// and a channel closed once it is ready.
func (l *Leadership) Get() (ready bool, term uint64, readyC <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready, l.term, l.readyC
}

// Subscribe returns a channel that holds the latest readiness, now and
// after every change, and the cancel that stops delivery.
func (l *Leadership) Subscribe() (<-chan bool, func()) {
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

// CloseAll tells subscribers leadership is gone for good on Close.
func (l *Leadership) CloseAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ready {
		l.ready = false
		l.readyC = make(chan struct{})
		l.publish(false)
	}
}

// SetRaft gives the tracker the member's raft once it runs.
func (l *Leadership) SetRaft(r *raft.Raft) { l.raft.Store(r) }

// IsLeader reports whether this member is the leader and has applied every
// entry of earlier terms.
func (l *Leadership) IsLeader() bool {
	ready, term, _ := l.Get()
	r := l.raft.Load()
	return ready && r != nil && r.State() == raft.Leader && r.CurrentTerm() == term
}

// WaitReady waits until this member is the ready leader. It returns
// ErrNotRaftLeader when raft says it is not the leader at all (now, or
// while it waits: raft's state is checked again every recheck), and
// ErrClosed when stop closes.
func (l *Leadership) WaitReady(ctx context.Context, stop <-chan struct{}, recheck time.Duration) error {
	for {
		ready, term, readyC := l.Get()
		r := l.raft.Load()
		if r == nil || r.State() != raft.Leader {
			return ErrNotRaftLeader
		}
		if ready && r.CurrentTerm() == term {
			return nil
		}
		select {
		case <-readyC:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		case <-time.After(recheck):
			// Re-check raft's state: it may have stepped down meanwhile.
		}
	}
}

// FollowConfig is what Follow works with.
type FollowConfig struct {
	Stop <-chan struct{}
	// Observed carries raft's leader and state observations; some may be
	// dropped, so Follow also reconciles every Recheck.
	Observed <-chan raft.Observation
	Recheck  time.Duration
	// Ctx ends when the member closes; Barrier bounds the barrier of a
	// term won, and Prepare's context.
	Ctx     context.Context
	Barrier time.Duration
	Log     *slog.Logger
	// Prepare runs after the barrier of a term won, before the member is
	// ready (the server records the cluster settings, the cell root and
	// the first ACL rules); an error leaves it not ready, and the next
	// reconcile tries again.
	Prepare func(ctx context.Context, term uint64) error
	// Follower is told, at each reconcile while raft does not lead here,
	// the leader raft knows ("" for none) and whether this member just
	// lost its readiness.
	Follower func(leader raft.ServerID, lost bool)
	// Ready is told when this member became the ready leader.
	Ready func()
	// Applied is the applied index, for the log.
	Applied func() uint64
}

// Follow follows raft's leadership until Stop, and makes this member
// ready after a barrier and Prepare when it wins a term. Call it after
// SetRaft.
func (l *Leadership) Follow(cfg FollowConfig) {
	tick := time.NewTicker(cfg.Recheck)
	defer tick.Stop()
	for {
		l.reconcile(&cfg)
		select {
		case <-cfg.Stop:
			return
		case <-cfg.Observed:
		case <-tick.C:
		}
	}
}

func (l *Leadership) reconcile(cfg *FollowConfig) {
	r := l.raft.Load()
	ready, term, _ := l.Get()
	if r.State() != raft.Leader {
		if ready {
			l.Set(false, 0)
			cfg.Log.Info("lost leadership", "term", term)
		}
		_, lid := r.LeaderWithID()
		cfg.Follower(lid, ready)
		return
	}
	cur := r.CurrentTerm()
	if ready && term == cur {
		return
	}
	// A barrier commits an entry of this term and waits until the FSM has
	// applied everything before it.
	start := time.Now()
	err := r.Barrier(cfg.Barrier).Error()
	if err != nil || r.State() != raft.Leader || r.CurrentTerm() != cur {
		if err != nil {
			cfg.Log.Warn("leader barrier failed", "term", cur, "err", err)
		}
		if ready {
			l.Set(false, 0)
		}
		return
	}
	ctx, cancel := context.WithTimeout(cfg.Ctx, cfg.Barrier)
	err = cfg.Prepare(ctx, cur)
	cancel()
	if err != nil {
		cfg.Log.Warn("preparing the new leader failed; retrying", "term", cur, "err", err)
		if ready {
			l.Set(false, 0)
		}
		return
	}
	l.Set(true, cur)
	cfg.Log.Info("leader ready", "term", cur, "barrier", time.Since(start), "applied_index", cfg.Applied())
	cfg.Ready()
}
