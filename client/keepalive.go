package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latch-io/latch/session"
)

const (
	// keepaliveParallel bounds the keepalives in flight at once.
	keepaliveParallel = 64
	// Retrying a failed keepalive waits TTL/10, within these bounds: soon
	// enough to renew before the lease ends, not so soon that a client
	// with many sessions floods a struggling leader.
	minKeepaliveRetry = 10 * time.Millisecond
	maxKeepaliveRetry = time.Second
)

// wakeKeepalive makes the keepalive loop look at the sessions now.
func (c *Client) wakeKeepalive() {
	select {
	case c.kaWake <- struct{}{}:
	default:
	}
}

// keepaliveLoop renews every session at about TTL/3 and moves their
// trackers through jeopardy and expiry on time. One loop serves all the
// client's sessions; the renewals themselves run in goroutines so that a
// slow answer never delays another session's deadline.
func (c *Client) keepaliveLoop() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := c.keepaliveRound(time.Now())
		t.Reset(time.Until(next))
		select {
		case <-t.C:
		case <-c.kaWake:
		case <-c.ctx.Done():
			return
		}
	}
}

// keepaliveRound starts the renewals due at now and returns when the next
// round is due.
func (c *Client) keepaliveRound(now time.Time) time.Time {
	c.mu.Lock()
	l := c.cur
	live := make([]*Session, 0, len(c.sessions))
	for _, s := range c.sessions {
		live = append(live, s)
	}
	c.mu.Unlock()

	next := now.Add(time.Hour)
	var due []*Session
	for _, s := range live {
		check, ok := s.tr.NextCheck() // applies jeopardy and expiry
		if !ok {
			s.expire(nil)
			continue
		}
		next = earliest(next, check)
		send, at := s.schedule(now, l != nil)
		if send {
			due = append(due, s)
		} else if !at.IsZero() {
			next = earliest(next, at)
		}
	}
	if len(due) > 0 {
		c.goFunc(func() { c.renew(l, due) })
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// schedule reports whether s should be renewed now and, if not, when it
// should be (zero: nothing to schedule until the loop is woken). A
// keepalive due within the next TTL/12 goes now, so that sessions opened
// close together are renewed together.
func (s *Session) schedule(now time.Time, connected bool) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending || s.inflight || !connected {
		// In flight: its end wakes the loop. No link: publish wakes it.
		return false, time.Time{}
	}
	if now.Before(s.nextSend.Add(-s.ttl / 12)) {
		return false, s.nextSend
	}
	s.inflight = true
	return true, time.Time{}
}

// renewed ends a keepalive: the next is due at next.
func (s *Session) renewed(next time.Time) {
	s.mu.Lock()
	s.inflight = false
	s.nextSend = next
	s.mu.Unlock()
}

// dueNow makes s's next keepalive due at once (after a reconnection).
func (s *Session) dueNow(now time.Time) {
	s.mu.Lock()
	s.nextSend = now
	s.mu.Unlock()
}

// renew renews the sessions in due over l: in batches when the member
// takes many sessions per KeepAlive, else one keepalive per session, in
// parallel.
func (c *Client) renew(l *link, due []*Session) {
	defer c.wakeKeepalive()
	sem := make(chan struct{}, keepaliveParallel)
	var wg sync.WaitGroup
	batch := 1
	if l.features&session.FeatureKeepAliveBatch != 0 {
		batch = session.MaxKeepAliveBatch
	}
	for len(due) > 0 {
		n := min(batch, len(due))
		part := due[:n]
		due = due[n:]
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			for _, s := range part {
				s.renewed(time.Now())
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c.renewBatch(l, part)
		})
	}
	wg.Wait()
}

// renewBatch sends one KeepAlive for the sessions of batch (one session
// when the member does not take batches). The answer's wait is bounded by
// the shortest TTL/3: past it the next keepalive would be due anyway.
func (c *Client) renewBatch(l *link, batch []*Session) {
	shortest := batch[0].ttl
	for _, s := range batch {
		shortest = min(shortest, s.ttl)
	}
	ctx, cancel := context.WithTimeout(c.ctx, shortest/3)
	defer cancel()
	ready := make([]*Session, 0, len(batch))
	for _, s := range batch {
		if err := c.resume(ctx, l, s); err != nil {
			c.renewFailed(l, s, err)
			continue
		}
		ready = append(ready, s)
	}
	if len(ready) == 0 {
		return
	}
	req := &session.Request{Type: session.MsgKeepAlive, Session: ready[0].id}
	if len(ready) > 1 {
		req.Sessions = make([]uint64, len(ready)-1)
		for i, s := range ready[1:] {
			req.Sessions[i] = s.id
		}
	}
	sent := time.Now()
	for _, s := range ready {
		s.tr.Sent(sent)
	}
	resp, err := session.RoundTrip(ctx, l.conn, req)
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		for _, s := range ready {
			c.renewFailed(l, s, err)
		}
		return
	}
	if len(ready) == 1 && len(resp.KeepAlives) == 0 {
		ready[0].renewedAt(sent, resp.TTLMillis)
		return
	}
	results := make(map[uint64]*session.KeepAliveResult, len(resp.KeepAlives))
	for i := range resp.KeepAlives {
		results[resp.KeepAlives[i].Session] = &resp.KeepAlives[i]
	}
	for _, s := range ready {
		r, ok := results[s.id]
		switch {
		case !ok:
			c.renewFailed(l, s, fmt.Errorf("%w: keepalive answer lacks session %d", ErrMalformed, s.id))
		case r.Code != session.CodeOK:
			c.renewFailed(l, s, r.Err())
		default:
			s.renewedAt(sent, r.TTLMillis)
		}
	}
}

// renewedAt records the ack of a keepalive sent at sent.
func (s *Session) renewedAt(sent time.Time, ttlMillis int64) {
	ttl := time.Duration(ttlMillis) * time.Millisecond
	if ttl <= 0 {
		ttl = s.ttl
	}
	s.tr.Acked(sent, ttl)
	s.renewed(sent.Add(s.ttl / 3))
}

// renewFailed handles a keepalive of s over l that failed with err.
func (c *Client) renewFailed(l *link, s *Session, err error) {
	switch {
	case errors.Is(err, ErrUnknownSession):
		// Not attached on this connection (the member restarted, or a
		// reconnect raced): resume, which tells whether it still exists.
		s.detach(l.gen)
		s.renewed(time.Now())
		return
	case sessionGone(err):
		s.expire(err)
	case leaderOf(err) != "":
		c.drop(l, leaderOf(err), err)
	case errors.Is(err, context.DeadlineExceeded) && c.ctx.Err() == nil:
		if !l.conn.Watched() {
			// No answer within TTL/3: the member may be stopped or cut
			// off while the connection looks alive. Waiting for the QUIC
			// idle timeout could outlast the session's lease elsewhere.
			c.drop(l, "", err)
			break
		}
		// A watched connection (Config.FailureTimeout) needs none of
		// that: its watchdog watched the member the whole time the
		// keepalive waited and would have closed the connection had the
		// member stopped or been cut off; it did not, so the member is
		// alive and slow, and a new connection would only add a
		// handshake to its load (in a 5,000-client storm, 4,636
		// keepalive timeouts, each a reconnection, were most of the load
		// that starved the clients still opening). The keepalive is
		// retried on the same connection, and the sessions are held as
		// for a client that is reconnecting while members answer
		// (holdSessions, bounded by ReconnectGrace): the member that
		// answers nothing in time is the one holding them.
		c.holdSessions()
	}
	c.log.Debug("latch: keepalive failed", "session", s.id, "err", err)
	s.renewed(time.Now().Add(min(max(s.ttl/10, minKeepaliveRetry), maxKeepaliveRetry)))
}
