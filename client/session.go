package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// State is what the client knows of a session's lease (see
// session.Tracker): StateConnected, StateJeopardy (the lease ran out
// without an ack; the client is looking for a leader and the session may
// be dead), StateReconnected (an ack ended a jeopardy: the session lived)
// and StateExpired (final).
type State = session.State

// Session states.
const (
	StateConnected   = session.StateConnected
	StateJeopardy    = session.StateJeopardy
	StateReconnected = session.StateReconnected
	StateExpired     = session.StateExpired
)

// Session is a lease on the cluster kept alive by the client's keepalives
// (every TTL/3). Ephemeral nodes and locks belong to a session and vanish
// when it ends: by Close, or by expiry when the server hears nothing from
// it for its TTL. A Session survives reconnections and leader changes.
type Session struct {
	c      *Client
	id     uint64
	secret []byte
	ttl    time.Duration
	tr     *session.Tracker

	gen atomic.Uint64 // generation of the link s is attached to; 0: none

	mu       sync.Mutex
	ending   bool      // Close or Orphan began: no more keepalives
	closeErr error     // set by Close and Orphan; wins over the tracker's error
	nextSend time.Time // when the next keepalive is due
	inflight bool      // a keepalive is on its way
}

// NewSession opens another session on the client's connection, asking for
// ttl (0: Config.SessionTTL; the server may clamp it). Sessions are
// independent: each has its own lease and ephemeral nodes, as etcd
// separates leases from the client. An attempt whose outcome is unknown
// (the leader lost leadership while committing it) is made again while
// ctx allows: a session it may have opened is known to nobody, owns
// nothing and expires after its TTL.
func (c *Client) NewSession(ctx context.Context, ttl time.Duration) (*Session, error) {
	if ttl == 0 {
		ttl = c.cfg.SessionTTL
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: session TTL %v", ErrBadOption, ttl)
	}
	var (
		sent time.Time
		resp *session.Response
		l    *link
		err  error
	)
	for try := 1; ; try++ {
		// The lease starts when the answered attempt left, not when the
		// call began: an open that waited out a reconnection and a busy
		// leader's queue for longer than TTL plus the grace was declared
		// expired the moment the server answered it.
		resp, l, sent, err = c.sendAt(ctx, nil, &session.Request{Type: session.MsgOpenSession, TTLMillis: ttl.Milliseconds()})
		if !errors.Is(err, ErrUnknownOutcome) || !c.sleep(ctx, try) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	granted := time.Duration(resp.TTLMillis) * time.Millisecond
	if granted <= 0 {
		granted = ttl
	}
	s := &Session{
		c:      c,
		id:     resp.Session,
		secret: resp.Secret,
		ttl:    granted,
		tr:     session.NewTracker(session.SystemClock(), sent, granted),
	}
	s.gen.Store(l.gen)
	s.nextSend = sent.Add(granted / 3)
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		s.finish(ErrClosed)
		return nil, ErrClosed
	}
	c.sessions[s.id] = s
	c.mu.Unlock()
	c.wakeKeepalive()
	c.log.Debug("latch: session opened", "session", s.id, "ttl", granted)
	return s, nil
}

// ID is the session's id, as shown by `latch sessions` and as the
// EphemeralOwner of its nodes.
func (s *Session) ID() uint64 { return s.id }

// TTL is the lease the server granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client is the client that carries s.
func (s *Session) Client() *Client { return s.c }

// State delivers every change of the session's state, in order; when the
// reader falls behind the oldest are dropped, so the last value received
// is the current state. It reports StateExpired and is closed when the
// session ends (expiry, Close or Orphan).
func (s *Session) State() <-chan State { return s.tr.Events() }

// Done is closed when the session has ended: it expired, or Close or
// Orphan was called. Err says which.
func (s *Session) Done() <-chan struct{} { return s.tr.Done() }

// lifeCtx returns a context that ends with the session or the client:
// the bound of a background clean-up (withdrawing a lock request, removing
// a semaphore node) that must outlast a leader change, since what it
// undoes lives exactly as long as the session.
func (s *Session) lifeCtx() (context.Context, context.CancelFunc) {
	return withCancelOn(s.c.ctx, s.Done())
}

// withCancelOn returns a context that ends with parent, when done closes,
// or when cancel is called; its goroutine ends with the context.
func withCancelOn(parent context.Context, done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Err is nil while the session lives; ErrSessionClosed after Close or
// Orphan; else an error wrapping ErrSessionExpired.
func (s *Session) Err() error {
	s.mu.Lock()
	err := s.closeErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.tr.Err()
}

// LeaseEnd is the time until which the session is known to live: the send
// time of the newest acknowledged keepalive plus the TTL. The server
// cannot expire it earlier, so a lock held by s is safe to use until
// then; after it, s is in jeopardy.
func (s *Session) LeaseEnd() time.Time { return s.tr.Deadline() }

// Create creates path like Client.Create; an Ephemeral node belongs to s.
func (s *Session) Create(ctx context.Context, path string, data []byte, opts ...CreateOption) (string, error) {
	return s.c.create(ctx, s, path, data, buildCreate(opts))
}

// Set is Client.Set as this session: the owner of its ephemeral nodes
// (lock, election and semaphore nodes included), which only it, or an
// admin, may change once ACLs are enforced (ErrPermissionDenied).
func (s *Session) Set(ctx context.Context, path string, data []byte, opts ...SetOption) (Stat, error) {
	return s.c.set(ctx, s, path, data, opts)
}

// Delete removes path as this session, which owns its ephemeral nodes
// (see Set). With WithVersion(v) it fails with ErrBadVersion unless the
// version is v; Recursive is not supported here (ErrBadOption).
func (s *Session) Delete(ctx context.Context, path string, opts ...DeleteOption) error {
	o, err := buildDelete(opts)
	if err != nil {
		return err
	}
	if o.recursive {
		return fmt.Errorf("%w: Session.Delete is not recursive (use Client.Delete)", ErrBadOption)
	}
	return s.c.deleteAs(ctx, s, path, o.version)
}

// Multi runs ops like Client.Multi; Ephemeral creates belong to s.
func (s *Session) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	return s.c.multi(ctx, s, ops)
}

// Close ends the session on the server: its ephemeral nodes vanish and its
// locks are released now rather than after the TTL (when it has more than
// max_lock_batch of them, the rest go in the leader ticks that follow at
// once; its sequencers stop checking as held at once). Keepalives stop at
// once; when the server cannot be told before ctx ends, the session is
// left to expire and ctx's error returned. Closing an ended session does
// nothing.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.ending || s.closeErr != nil {
		s.mu.Unlock()
		return nil
	}
	s.ending = true
	s.mu.Unlock()
	if s.tr.Err() != nil {
		s.finish(ErrSessionClosed)
		return nil
	}
	_, err := s.c.do(ctx, s, &session.Request{Type: session.MsgCloseSession, Session: s.id})
	if sessionGone(err) {
		err = nil // already gone: closed as asked
	}
	s.finish(ErrSessionClosed)
	return err
}

// Orphan stops the session's keepalives and forgets it locally, leaving
// the server to expire it after its TTL: its ephemeral nodes and the
// locks it holds live until then (lock-delay then applies, as after a
// crash), although the Mutexes here report Lost at once. Use it when the connection's state is unknown or another process
// takes over the session's nodes.
func (s *Session) Orphan() {
	s.mu.Lock()
	s.ending = true
	s.mu.Unlock()
	s.finish(ErrSessionClosed)
}

// usable returns the error a request acting for s fails with, or nil.
func (s *Session) usable() error { return s.Err() }

// finish ends s locally with err (Close, Orphan, client Close).
func (s *Session) finish(err error) {
	s.mu.Lock()
	if s.closeErr == nil && s.tr.Err() == nil {
		s.closeErr = err
	}
	s.ending = true
	s.mu.Unlock()
	s.tr.Expire(err)
	s.c.forget(s)
}

// expire ends s because the server no longer has it.
func (s *Session) expire(cause error) {
	s.tr.Expire(cause)
	if s.c.forget(s) {
		s.c.log.Info("latch: session expired", "session", s.id, "err", s.tr.Err())
	}
}

// attachedTo reports whether s is attached to the link of generation gen.
func (s *Session) attachedTo(gen uint64) bool { return s.gen.Load() == gen }

// attach records that s was resumed on the link of generation gen.
func (s *Session) attach(gen uint64) { s.gen.Store(gen) }

// detach forgets that s is attached to the link of generation gen, so
// the next request resumes it there.
func (s *Session) detach(gen uint64) { s.gen.CompareAndSwap(gen, 0) }

// forget removes s from the sessions the client keeps alive and resumes,
// reporting whether it was there.
func (c *Client) forget(s *Session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.id] != s {
		return false
	}
	delete(c.sessions, s.id)
	return true
}
