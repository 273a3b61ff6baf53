package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// link is one QUIC connection to a member that has said Hello and resumed
// the client's sessions. Links are never reused: after a failure the next
// connection is a new link with a new generation, and a session remembers
// the generation it was last attached to.
type link struct {
	conn     *session.Conn
	addr     string
	gen      uint64
	server   string          // the member's id, from Hello
	features session.Feature // optional protocol features, from Hello
}

var linkGen atomic.Uint64

// resumeParallel bounds the ResumeSession requests in flight while a new
// link is set up: enough to resume thousands of sessions in a few round
// trips without flooding the server's per-connection stream limit.
const resumeParallel = 64

// connectLoop owns the link: it connects, publishes the link, waits for it
// to fail (or be dropped by a redirect), and connects again, until Close.
func (c *Client) connectLoop() {
	defer c.wg.Done()
	for {
		l := c.connect()
		if l == nil {
			return
		}
		if !c.publish(l) {
			l.conn.CloseWithError(session.ConnClosed, "")
			return
		}
		select {
		case <-l.conn.Context().Done():
		case <-c.ctx.Done():
		}
		c.unpublish(l, "")
		l.conn.CloseWithError(session.ConnClosed, "")
		if c.ctx.Err() != nil {
			return
		}
		c.log.Info("latch: connection lost; reconnecting", "addr", l.addr, "member", l.server, "why", context.Cause(l.conn.Context()))
	}
}

// backoff is MinBackoff·2^n capped at MaxBackoff, with "equal jitter": a
// random point in its upper half, so clients that lost the same leader do
// not reconnect in lockstep, yet none waits much less than the schedule.
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.MaxBackoff
	if n < 30 {
		d = min(c.cfg.MinBackoff<<n, c.cfg.MaxBackoff)
	}
	return equalJitter(d)
}

// equalJitter returns a random point in the upper half of d.
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half)
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// establish dials addr (from d when not nil, else from a new socket;
// patient: d holds a slot there, so the handshake may take
// slotHandshakeTimeout), says Hello and resumes every live session. When
// the member is not the leader it returns the leader's address it named
// (possibly "") with the error.
func (c *Client) establish(parent context.Context, addr string, d *session.Dialer, patient bool) (*link, string, error) {
	dctx, dcancel := context.WithTimeout(parent, c.cfg.DialTimeout)
	defer dcancel()
	if d == nil {
		var err error
		if d, err = session.NewDialer(); err != nil {
			return nil, "", err
		}
	}
	tcfg := c.tcfg
	if patient {
		tcfg.HandshakeTimeout = max(tcfg.HandshakeTimeout, slotHandshakeTimeout)
	}
	conn, err := d.Dial(dctx, addr, c.tls, tcfg)
	if err != nil {
		return nil, "", err
	}
	// The member took us in: it is alive, and the sessions it is about
	// to take back are held while it does (holdSessions). Hello and the
	// resumes get a DialTimeout of their own: a handshake that used most
	// of it (a storm's queue and a loaded leader) must not make them fail
	// on arrival and send the client back into the storm.
	c.holdSessions()
	ctx, cancel := context.WithTimeout(parent, c.cfg.DialTimeout)
	defer cancel()
	hello, err := session.Hello(ctx, conn, c.cfg.ClientName)
	if err != nil {
		conn.CloseWithError(session.ConnClosed, "")
		return nil, "", err
	}
	l := &link{conn: conn, addr: addr, gen: linkGen.Add(1), server: hello.ServerID, features: hello.Features}
	if err := c.resumeAll(ctx, l); err != nil {
		conn.CloseWithError(session.ConnClosed, "")
		return nil, leaderOf(err), err
	}
	return l, "", nil
}

// resumeAll attaches every live session to l. A session the server no
// longer has is expired; any other failure abandons l (the member is not
// the leader, or the connection broke).
func (c *Client) resumeAll(ctx context.Context, l *link) error {
	c.mu.Lock()
	live := make([]*Session, 0, len(c.sessions))
	for _, s := range c.sessions {
		live = append(live, s)
	}
	c.mu.Unlock()
	if len(live) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, resumeParallel)
	)
	for _, s := range live {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.resume(ctx, l, s); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// resume attaches s to l. It returns nil when s is attached or turned out
// to be gone (s is then expired); else the failure, which concerns l.
func (c *Client) resume(ctx context.Context, l *link, s *Session) error {
	if s.attachedTo(l.gen) {
		return nil
	}
	resp, err := session.RoundTrip(ctx, l.conn, &session.Request{
		Type: session.MsgResumeSession, Session: s.id, Secret: s.secret,
	})
	if err != nil {
		return err
	}
	err = resp.Err()
	switch {
	case err == nil:
		// Not an ack for the lease: the member need not have renewed
		// it. The keepalive publish triggers does.
		s.attach(l.gen)
		return nil
	case sessionGone(err):
		s.expire(err)
		return nil
	}
	return err
}

// sessionGone reports whether err says the server no longer has the
// session, so it will never come back.
func sessionGone(err error) bool {
	return errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrNoSession) ||
		errors.Is(err, ErrUnknownSession) || errors.Is(err, ErrBadSecret)
}

// leaderOf returns the leader address an ErrNotLeader carries, else "".
func leaderOf(err error) string {
	var e *session.Error
	if errors.As(err, &e) && e.Code == session.CodeNotLeader {
		return e.Leader
	}
	return ""
}

// publish makes l the client's link and wakes everything waiting for one.
func (c *Client) publish(l *link) bool {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return false
	}
	c.cur = l
	c.linked, c.fatal = true, nil
	close(c.ready)
	now := time.Now()
	for _, s := range c.sessions {
		// Renew at once: the new member may have given the sessions
		// less than a full TTL since our last keepalive.
		s.dueNow(now)
	}
	c.mu.Unlock()
	c.wakeKeepalive()
	return true
}

// unpublish retires l if it is still the client's link, remembering hint
// as the address to try first. Requests arriving from now on wait for the
// next link.
func (c *Client) unpublish(l *link, hint string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != l {
		return false
	}
	c.cur = nil
	c.ready = make(chan struct{})
	c.hint = hint
	return true
}

// drop gives up on l: it is broken, or a redirect names a better member.
// The connect loop notices the closed connection and connects again,
// trying hint first.
func (c *Client) drop(l *link, hint string, why error) {
	if c.unpublish(l, hint) {
		c.log.Debug("latch: dropping connection", "addr", l.addr, "leader", hint, "why", why)
	}
	l.conn.CloseWithError(session.ConnClosed, "")
}

func (c *Client) setLastErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

// waitLink returns the current link, waiting for one while the client
// reconnects. The wait ends with ctx, with Close, or when s (if not nil)
// ends.
func (c *Client) waitLink(ctx context.Context, s *Session) (*link, error) {
	var sdone <-chan struct{}
	if s != nil {
		sdone = s.Done()
	}
	for {
		c.mu.Lock()
		l, ready, fatal := c.cur, c.ready, c.fatal
		c.mu.Unlock()
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if l != nil {
			return l, nil
		}
		if fatal != nil {
			return nil, fatal
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, c.waitErr(ctx)
		case <-c.ctx.Done():
			return nil, ErrClosed
		case <-sdone:
			return nil, s.Err()
		}
	}
}

// waitErr explains a ctx that ended while no connection was up.
func (c *Client) waitErr(ctx context.Context) error {
	c.mu.Lock()
	last := c.lastErr
	c.mu.Unlock()
	if last == nil {
		return fmt.Errorf("%w: %w (trying %s)", ErrNoEndpoint, ctx.Err(), strings.Join(c.cfg.Endpoints, ","))
	}
	return fmt.Errorf("%w: %w (last error: %v)", ErrNoEndpoint, ctx.Err(), last)
}
