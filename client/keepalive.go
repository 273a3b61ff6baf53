package client

import (
	"context"
	"errors"
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

// renew sends one keepalive per session in due over l, in parallel.
func (c *Client) renew(l *link, due []*Session) {
	defer c.wakeKeepalive()
	sem := make(chan struct{}, keepaliveParallel)
	var wg sync.WaitGroup
	for _, s := range due {
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			s.renewed(time.Now())
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c.renewOne(l, s)
		})
	}
	wg.Wait()
}

// renewOne sends s's keepalive. The answer's wait is bounded by TTL/3:
// past it the next keepalive would be due anyway.
func (c *Client) renewOne(l *link, s *Session) {
	ctx, cancel := context.WithTimeout(c.ctx, s.ttl/3)
	defer cancel()
	retry := time.Now().Add(min(max(s.ttl/10, minKeepaliveRetry), maxKeepaliveRetry))
	if err := c.resume(ctx, l, s); err != nil {
		if leader := leaderOf(err); leader != "" {
			c.drop(l, leader, err)
		}
		s.renewed(retry)
		return
	}
	sent := time.Now()
	s.tr.Sent(sent)
	resp, err := session.RoundTrip(ctx, l.conn, &session.Request{Type: session.MsgKeepAlive, Session: s.id})
	if err == nil {
		err = resp.Err()
	}
	switch {
	case err == nil:
		ttl := time.Duration(resp.TTLMillis) * time.Millisecond
		if ttl <= 0 {
			ttl = s.ttl
		}
		s.tr.Acked(sent, ttl)
		s.renewed(sent.Add(s.ttl / 3))
		return
	case errors.Is(err, ErrUnknownSession):
		// Not attached on this connection (the member restarted, or a
		// reconnect raced): resume, which tells whether it still exists.
		s.detach(l.gen)
		s.renewed(time.Now())
		return
	case sessionGone(err):
		s.expire(err)
		s.renewed(retry)
		return
	case leaderOf(err) != "":
		c.drop(l, leaderOf(err), err)
	}
	c.log.Debug("latch: keepalive failed", "session", s.id, "err", err)
	s.renewed(retry)
}
