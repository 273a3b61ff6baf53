package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Election is leader election on a path: a campaign is an exclusive lock
// request on the path whose request node holds the candidate's value, so
// candidates are served in the order they campaigned, the leader's value
// is in the namespace for anyone to read, and the leader's term is its
// fencing token (it increases with every new leader).
//
//	e := client.NewElection(sess, "/services/billing/leader")
//	if err := e.Campaign(ctx, []byte("10.0.0.7:8080")); err != nil { ... }
//	// leading: act with e.Term() as fencing token until e.Lost() closes
//	e.Resign(ctx)
//
// Observers need no session: Leader reads the current leader, Observe
// follows it.
type Election struct {
	s    *Session
	c    *Client
	path string
	opts []LockOption

	mu sync.Mutex
	h  *lockHandle // the latest campaign
}

// LeaderInfo is an election's state as Observe reports it: the leader's
// value and term, or None when nobody leads (nobody campaigns, or a lost
// leader's lock-delay runs).
type LeaderInfo struct {
	Value []byte
	Term  uint64
	None  bool
}

// NewElection returns an election on path for s. Options are those of a
// lock: WithHoldTTL, WithLockDelay (how long the election stays leaderless
// after a leader's session expires).
func NewElection(s *Session, path string, opts ...LockOption) *Election {
	return &Election{s: s, c: s.c, path: path, opts: opts}
}

// Campaign blocks until s leads the election with value, ctx ends (the
// candidacy is withdrawn) or the session ends. Campaigning again while
// leading fails with ErrWouldDeadlock.
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	o := buildLock(e.opts)
	o.data = append([]byte(nil), value...)
	h := newLockHandle(e.s, e.path, LockExclusive, o)
	e.mu.Lock()
	if e.h != nil && e.h.token() != 0 {
		e.mu.Unlock()
		return fmt.Errorf("%w: already leading %s", ErrWouldDeadlock, e.path)
	}
	prev := e.h
	e.h = h
	e.mu.Unlock()
	if err := h.acquire(ctx, false); err != nil {
		e.mu.Lock()
		if e.h == h {
			e.h = prev
		}
		e.mu.Unlock()
		return err
	}
	return nil
}

func (e *Election) handle() *lockHandle {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.h
}

// Proclaim changes the leader's value without an election. It fails with
// ErrNotHeld when s does not lead.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	h := e.handle()
	node := ""
	if h != nil {
		node = h.nodeName()
	}
	if node == "" {
		return fmt.Errorf("%w: not the leader of %s", ErrNotHeld, e.path)
	}
	if err := h.lostErr(); err != nil {
		return err
	}
	_, err := e.s.Set(ctx, node, value) // the node is the session's: only it may change it
	if errors.Is(err, ErrNoNode) {
		return fmt.Errorf("%w: no longer the leader of %s", ErrNotHeld, e.path)
	}
	return err
}

// Resign gives up leadership (or a candidacy Campaign is not running any
// more); without one it does nothing.
func (e *Election) Resign(ctx context.Context) error {
	h := e.handle()
	if h == nil || h.nodeName() == "" {
		return nil
	}
	err := h.release(ctx)
	if errors.Is(err, ErrLockLost) || errors.Is(err, ErrNotHeld) {
		return nil // not leading any more either way
	}
	return err
}

// Term is this session's term while it leads (its fencing token), else 0.
func (e *Election) Term() uint64 {
	if h := e.handle(); h != nil {
		return h.token()
	}
	return 0
}

// Sequencer names this leader's lock for resource servers.
func (e *Election) Sequencer() Sequencer {
	if h := e.handle(); h != nil {
		return h.sequencer()
	}
	return Sequencer{Path: e.path, Session: e.s.id}
}

// Lost is closed when the leadership won by the latest Campaign is lost
// (the session ended, the lock was taken away); not by Resign. Before a
// won campaign it is nil.
func (e *Election) Lost() <-chan struct{} {
	if h := e.handle(); h != nil {
		return h.lostC()
	}
	return nil
}

// Err says why Lost closed: nil while leading or after Resign.
func (e *Election) Err() error {
	if h := e.handle(); h != nil {
		return h.lostErr()
	}
	return nil
}

// Leader returns the current leader's value and term, or
// ErrNoElectionLeader. It is a linearizable read.
func (e *Election) Leader(ctx context.Context) ([]byte, uint64, error) {
	return readLeader(ctx, e.c, e.path)
}

// Leader reads the leader of the election on path; see Election.Leader.
func (c *Client) Leader(ctx context.Context, path string) ([]byte, uint64, error) {
	return readLeader(ctx, c, path)
}

func readLeader(ctx context.Context, c *Client, path string) ([]byte, uint64, error) {
	info, _, err := leaderState(ctx, c, path)
	if err != nil {
		return nil, 0, err
	}
	if info.None {
		return nil, 0, fmt.Errorf("%w: %s", ErrNoElectionLeader, path)
	}
	return info.Value, info.Term, nil
}

// leaderState reads the election: its leader, or None and when to look
// again (0: only on a change) because a leader is about to be granted.
func leaderState(ctx context.Context, c *Client, path string) (LeaderInfo, time.Duration, error) {
	for {
		q, err := c.LockQueue(ctx, path)
		if err != nil {
			return LeaderInfo{}, 0, err
		}
		var holder *LockInfo
		var again time.Duration
		for i := range q {
			li := &q[i]
			switch {
			case li.Phantom:
				// Lock-delay: the next candidate is granted by a tick,
				// which no watch reports.
				again = max(again, time.Until(time.Unix(0, li.DelayEnd)))
			case li.Granted && li.Mode == LockExclusive && holder == nil:
				holder = li
			case !li.Granted && again == 0:
				again = -1 // waiting with nobody ahead: granted soon
			}
		}
		if holder == nil {
			return LeaderInfo{None: true}, again, nil
		}
		data, _, err := c.Get(ctx, holder.Node)
		if errors.Is(err, ErrNoNode) {
			continue // the leader changed in between
		}
		if err != nil {
			return LeaderInfo{}, 0, err
		}
		if data == nil {
			data = []byte{}
		}
		return LeaderInfo{Value: data, Term: holder.Token}, 0, nil
	}
}

// Observe reports the election's leader now and at every change (a new
// leader, a proclaimed value, nobody leading) until ctx ends or the client
// closes; then the channel is closed. A slow reader holds back only its
// own observation, and sees every state that lasted until it read.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	return e.c.ObserveLeader(ctx, e.path)
}

// ObserveLeader follows the election on path; see Election.Observe.
func (c *Client) ObserveLeader(ctx context.Context, path string) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	if !c.goFunc(func() { c.observe(ctx, path, out) }) {
		close(out)
	}
	return out
}

// Polling bounds for an election whose next leader no watch announces
// (granted by a tick after lock-delay, or left over from a full batch).
const (
	minLeaderPoll = 5 * time.Millisecond
	maxLeaderPoll = time.Second
)

func (c *Client) observe(ctx context.Context, path string, out chan<- LeaderInfo) {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	var (
		last  *LeaderInfo
		w     *Watcher
		idle  int
		poll  = minLeaderPoll
		timer = time.NewTimer(time.Hour)
	)
	defer timer.Stop()
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	for ctx.Err() == nil {
		if w == nil {
			var err error
			// Every request node and its data are in the subtree: a
			// watch from before the read misses no change.
			if w, err = c.Watch(ctx, path, Recursive()); err != nil {
				idle++
				if !c.sleep(ctx, idle) {
					return
				}
				continue
			}
		}
		info, again, err := leaderState(ctx, c, path)
		if err != nil {
			idle++
			if !c.sleep(ctx, idle) {
				return
			}
			continue
		}
		idle = 0
		if last == nil || !sameLeader(*last, info) {
			last = &info
			select {
			case out <- info:
			case <-ctx.Done():
				return
			}
		}
		switch {
		case again > 0:
			timer.Reset(again + minLeaderPoll)
		case again < 0:
			timer.Reset(poll)
			poll = min(2*poll, maxLeaderPoll)
		default:
			poll = minLeaderPoll
			timer.Stop()
		}
		select {
		case _, ok := <-w.Events():
			if !ok {
				w.Close()
				w = nil
				continue
			}
			// One read answers every event that is already here.
			for drained := false; !drained; {
				select {
				case _, ok := <-w.Events():
					if !ok {
						w.Close()
						w = nil
						drained = true
					}
				default:
					drained = true
				}
			}
		case <-timer.C:
		case <-ctx.Done():
			return
		}
	}
}

func sameLeader(a, b LeaderInfo) bool {
	return a.None == b.None && a.Term == b.Term && bytes.Equal(a.Value, b.Value)
}
