package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Locks are the server's: a lock request is an ephemeral sequential node
// under the locked path, owned by a session, granted in revision order
// (FIFO across the whole hierarchy: a lock on /billing covers
// /billing/job-a). The recipes here are thin: Mutex and RWMutex hold one
// request each; Election is an exclusive lock whose request node holds
// the candidate's value.
//
// How a lock is acquired and kept:
//
//   - Lock sends a new request as MsgLockCall, a unary call on the
//     connection's mux stream, when the member serves it: a free lock
//     (the common case) is granted in the answer, at the cost of a set.
//     A request answered Queued is waited for like a re-attach (MsgLock
//     with Node, below) on a stream of its own. Members that do not serve
//     the call, and a Lock whose previous Lock had to wait (a contended
//     lock saves the call's round trip), send MsgLock, which waits on
//     its stream: Queued (the request node), then Granted (the fencing
//     token). ctx bounds the call and the wait; when it ends the call is
//     cancelled or the stream reset (the server withdraws the request if
//     the answer did not go out, or if it still waits) and the client
//     withdraws the request itself (MsgLockRelease by node, or by request
//     id), which releases the lock if the grant raced ctx's end: the
//     server ends the stream at the grant, so a grant written before the
//     reset reached it is one only the client knows it never delivered.
//     A grant is either returned by Lock or released, never left held by
//     a caller that gave up. While it waits, the deadline also travels as
//     the request's timeout, so the server withdraws it even if nothing
//     else reaches it.
//   - The server ends the stream at the grant: a held lock is not a
//     request in flight. It tells of the lock's end (lost, deleted, or
//     released by a request of another connection) on the connection's
//     one lock notices stream, which the client's lockFollower reads
//     (lockfollow.go): that closes Lost(). Lost() also closes when the
//     session ends (the follower watches each session that holds locks).
//     A held lock costs the client no goroutine.
//   - After a connection loss or a leader change the client re-attaches to
//     its request node (MsgLock with Node) on the new leader, keeping its
//     place in the queue, while waiting and while holding. Every Lock call
//     names its request with a random request id: when the request was
//     sent but its node never came back (the connection broke first), the
//     client sends it again with the same id and the server answers with
//     the request it already has. Nothing is guessed.
//   - A grant that arrives after the session's proven lease end
//     (Session.LeaseEnd) is refused with ErrLockLost and released: the
//     session may have expired in between (Jepsen found etcd handing out
//     locks after their lease died).

// LockMode is how a lock is held: LockExclusive or LockShared.
type LockMode = session.LockMode

// Lock modes.
const (
	LockExclusive = session.LockExclusive
	LockShared    = session.LockShared
)

// Sequencer names a held lock (path, mode, fencing token, session) so that
// a resource server can check it with Client.CheckSequencer, or compare
// tokens, before acting for the holder.
type Sequencer = session.Sequencer

// LockInfo describes one lock request as Client.LockQueue lists it.
type LockInfo = session.LockInfo

// LockOption modifies NewMutex, NewRWMutex and NewElection.
type LockOption interface{ applyLock(*lockOptions) }

type lockOptions struct {
	holdTTL   time.Duration
	lockDelay time.Duration // <0: none; 0: the server's default
	data      []byte
}

type holdTTLOption time.Duration

func (d holdTTLOption) applyLock(o *lockOptions) { o.holdTTL = time.Duration(d) }

// WithHoldTTL makes a granted lock expire d after its grant (or its last
// renewal) even while the session lives: a lease-per-lock. Lost() closes
// when it does. Renew restarts it. Default: held until released or the
// session ends.
func WithHoldTTL(d time.Duration) LockOption { return holdTTLOption(d) }

type lockDelayOption time.Duration

func (d lockDelayOption) applyLock(o *lockOptions) {
	o.lockDelay = time.Duration(d)
	if d <= 0 {
		o.lockDelay = -1
	}
}

// WithLockDelay sets how long the lock stays unavailable to others when
// this holder is lost without releasing it (its session expired, its hold
// TTL passed), so that a holder that was cut off can notice before anyone
// else acts; 0 turns lock-delay off. The server caps it (60s by default);
// without this option its default applies (5s).
func WithLockDelay(d time.Duration) LockOption { return lockDelayOption(d) }

func buildLock(opts []LockOption) lockOptions {
	var o lockOptions
	for _, opt := range opts {
		opt.applyLock(&o)
	}
	return o
}

func (o lockOptions) check() error {
	if o.holdTTL < 0 || (o.holdTTL > 0 && o.holdTTL < time.Millisecond) {
		return fmt.Errorf("%w: hold TTL %v", ErrBadOption, o.holdTTL)
	}
	return nil
}

func (o lockOptions) delayMillis() int64 {
	switch {
	case o.lockDelay < 0:
		return namespace.NoLockDelay
	case o.lockDelay == 0:
		return 0
	}
	return max(o.lockDelay.Milliseconds(), 1)
}

// Mutex is an exclusive lock on a path, held by a session. It is not
// re-entrant: locking a path the session already holds (or a path above
// or below it) fails with ErrWouldDeadlock. One Mutex holds at most one
// lock at a time; use one Mutex per goroutine that locks.
type Mutex struct{ h *lockHandle }

// NewMutex returns an exclusive lock on path for s. Nothing is sent until
// Lock.
func NewMutex(s *Session, path string, opts ...LockOption) *Mutex {
	return &Mutex{h: newLockHandle(s, path, LockExclusive, buildLock(opts))}
}

// Lock blocks until the lock is granted, ctx ends (the request is
// withdrawn and ctx's error returned) or the session ends. Locking again
// after Lost closed first lets go of the lost lock. Errors:
// ErrWouldDeadlock (the session holds or waits for a conflicting lock),
// ErrLockLost (granted too late to be trusted; the lock was released),
// ErrSessionExpired, ErrBadPath, ErrEphemeralParent.
func (m *Mutex) Lock(ctx context.Context) error { return m.h.acquire(ctx, false) }

// TryLock takes the lock only if it is granted at once (nobody holds a
// conflicting lock or waits for one before it, no lock-delay runs); else
// it fails with ErrLocked and leaves nothing queued.
func (m *Mutex) TryLock(ctx context.Context) error { return m.h.acquire(ctx, true) }

// Unlock releases the lock. It returns ErrNotHeld when the Mutex holds
// nothing, and the loss error (ErrLockLost, or the session's error) when
// the lock had been lost before.
func (m *Mutex) Unlock(ctx context.Context) error { return m.h.release(ctx) }

// Renew restarts the hold TTL of the held lock (see WithHoldTTL).
func (m *Mutex) Renew(ctx context.Context) error { return m.h.renew(ctx) }

// Token is the held lock's fencing token (0 when not held): it increases
// with every grant of this lock, so a resource can refuse older holders.
func (m *Mutex) Token() uint64 { return m.h.token() }

// Sequencer names the held lock for a resource server (zero Token when not
// held).
func (m *Mutex) Sequencer() Sequencer { return m.h.sequencer() }

// Lost is closed when the lock taken by the last successful Lock or
// TryLock is lost: the session ended, or the server took the lock away
// (hold TTL, node deleted). It is not closed by Unlock. Before the first
// Lock it returns nil (a channel that never closes).
func (m *Mutex) Lost() <-chan struct{} { return m.h.lostC() }

// Err says why Lost closed: nil while the lock is held or was released
// by Unlock.
func (m *Mutex) Err() error { return m.h.lostErr() }

// Contended is closed when another session waits for a lock that
// conflicts with the one taken by the last successful Lock or TryLock,
// while it is held: a request queued behind it, or already waiting when
// it was granted (Chubby's "conflicting lock request"), so the holder
// can finish early and Unlock. The first call starts a watch of the
// lock's events (Locks), which ends with the hold; before the first Lock
// it returns nil. See contended.go.
func (m *Mutex) Contended() <-chan struct{} { return m.h.contendedC() }

// Node is the held lock's request node ("" when not held): the ephemeral
// node `latch ls PATH` shows.
func (m *Mutex) Node() string { return m.h.nodeName() }

// Revision is the held request's revision (0 when not held): requests
// are served in revision order among those that conflict.
func (m *Mutex) Revision() uint64 { return m.h.revision() }

// Path is the locked path.
func (m *Mutex) Path() string { return m.h.path }

// CheckSequencer asks the cluster whether sq's lock is still held with that
// token by that session (a linearizable read). A resource server calls it
// before acting for a request that carries sq.
func (c *Client) CheckSequencer(ctx context.Context, sq Sequencer) (bool, error) {
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgCheckSequencer, Sequencer: &sq})
	if err != nil {
		return false, err
	}
	return resp.Valid, nil
}

// LockQueue lists the lock requests on path in queue order, the granted
// ones first; phantoms are holders that were lost while lock-delay keeps
// the lock unavailable. At most 10000 are listed.
func (c *Client) LockQueue(ctx context.Context, path string, opts ...ReadOption) ([]LockInfo, error) {
	o := buildRead(opts)
	resp, err := c.read(ctx, o, &session.Request{Type: session.MsgLockQueue, Path: path})
	if err != nil {
		return nil, err
	}
	return resp.Locks, nil
}

// lockHandle is one lock request's life on the client: acquire, hold
// (watching for its loss, re-attaching after failovers), release. Mutex,
// RWMutex and Election are made of it.
type lockHandle struct {
	s    *Session
	c    *Client
	path string
	mode LockMode
	o    lockOptions
	now  func() time.Time // compared with the session's lease end

	mu   sync.Mutex
	busy bool  // an acquire or release runs
	cur  *hold // the lock held now; nil when none
	last *hold // the latest hold, for Lost and Err after a loss
	// waited: the last Lock had to wait in the queue. The next one then
	// opens its stream at once: a lock that was contended likely is
	// again, and a call answered Queued would cost a round trip more
	// than the stream alone.
	waited bool
}

func newLockHandle(s *Session, path string, mode LockMode, o lockOptions) *lockHandle {
	return &lockHandle{s: s, c: s.c, path: path, mode: mode, o: o, now: time.Now}
}

// hold is one granted lock.
type hold struct {
	node  string
	token uint64
	rev   uint64 // the request's revision: its place in the queue
	lost  chan struct{}

	mu        sync.Mutex
	err       error // why lost; nil while held
	unlocking bool  // Unlock released it: its stream's end is no loss

	contention // Contended (contended.go)
}

// lose records that the lock is gone (once) and closes lost, unless
// Unlock is releasing it.
func (hd *hold) lose(err error) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.unlocking || hd.err != nil {
		return
	}
	hd.err = err
	close(hd.lost)
}

func (hd *hold) lostErr() error {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.err
}

func (h *lockHandle) token() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return 0
	}
	return h.cur.token
}

func (h *lockHandle) revision() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return 0
	}
	return h.cur.rev
}

func (h *lockHandle) nodeName() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return ""
	}
	return h.cur.node
}

func (h *lockHandle) sequencer() Sequencer {
	return Sequencer{Path: h.path, Mode: h.mode, Token: h.token(), Session: h.s.id}
}

func (h *lockHandle) lostC() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return nil
	}
	return h.last.lost
}

func (h *lockHandle) lostErr() error {
	h.mu.Lock()
	hd := h.last
	h.mu.Unlock()
	if hd == nil {
		return nil
	}
	return hd.lostErr()
}

// begin marks an acquire or release running, refusing a second at once.
func (h *lockHandle) begin(acquire bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.busy:
		return fmt.Errorf("%w: %s: another Lock or Unlock of this lock is running", ErrWouldDeadlock, h.path)
	case acquire && h.cur != nil:
		return fmt.Errorf("%w: %s is already held by this lock (%s)", ErrWouldDeadlock, h.path, h.cur.node)
	}
	h.busy = true
	return nil
}

func (h *lockHandle) end() {
	h.mu.Lock()
	h.busy = false
	h.mu.Unlock()
}

// acquire runs Lock (try: TryLock).
func (h *lockHandle) acquire(ctx context.Context, try bool) error {
	if err := h.o.check(); err != nil {
		return err
	}
	h.mu.Lock()
	stale := h.cur != nil && h.cur.lostErr() != nil
	h.mu.Unlock()
	if stale {
		// Lock again after a loss: let go of the lost hold first (release
		// tells the server, in case only our watch of it failed).
		_ = h.release(ctx)
	}
	if err := h.begin(true); err != nil {
		return err
	}
	defer h.end()
	h.mu.Lock()
	waited := h.waited
	h.mu.Unlock()
	// A try-lock never waits: the call answers it in one frame either way.
	a := &acquisition{h: h, try: try, reqID: newRequestID(), stream: waited && !try}
	hd, err := a.run(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waited = a.queued
	if err != nil {
		return err
	}
	h.cur, h.last = hd, hd
	return nil
}

// acquisition is one Lock call's state across attempts.
type acquisition struct {
	h   *lockHandle
	try bool

	reqID    string // names the request across retries (the server's idempotency key)
	node     string // the request node, once known
	attempts int    // calls sent and streams opened
	stream   bool   // send the request on a stream, not as a call (see lockHandle.waited)
	queued   bool   // the request waited in the queue
}

// newRequestID returns a random lock request id.
func newRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("latch: no randomness for a lock request id: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// run sends the request, re-attaching after broken connections, until the
// lock is granted or the call fails.
func (a *acquisition) run(ctx context.Context) (*hold, error) {
	h, c := a.h, a.h.c
	req := session.Request{
		Type: session.MsgLock, Path: h.path, Mode: h.mode, Try: a.try, RequestID: a.reqID,
		HoldTTLMillis: h.o.holdTTL.Milliseconds(), LockDelayMillis: h.o.delayMillis(), Data: h.o.data,
	}
	hops, idle := redirects{}, 0
	for {
		if err := ctx.Err(); err != nil {
			a.abandon()
			return nil, fmt.Errorf("latch: lock %s: %w", h.path, err)
		}
		if dl, ok := ctx.Deadline(); ok {
			// The server withdraws the request on its own at the
			// deadline, even if the reset below never reaches it.
			req.TimeoutMillis = max(time.Until(dl).Milliseconds(), 1)
		}
		l, err := c.ready4(ctx, h.s, &req)
		if err != nil {
			a.abandon()
			return nil, a.wrap(ctx, err)
		}
		req.Node = a.node
		hd, err := a.attempt(ctx, l, &req)
		switch {
		case err == nil:
			return hd, nil
		case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
			return nil, err // the grant was refused (and released) or the client closed
		}
		var done bool
		if done, err = a.failed(ctx, l, &req, err, hops, &idle); done {
			return nil, err
		}
	}
}

// attempt sends a new request as a call (when l's member serves
// MsgLockCall) and, unless it was granted at once, waits for it on a
// MsgLock stream on l until the grant.
func (a *acquisition) attempt(ctx context.Context, l *link, req *session.Request) (*hold, error) {
	if a.node == "" && !a.stream && l.features&session.FeatureLockCall != 0 {
		hd, err := a.call(ctx, l, req)
		if err != nil || hd != nil {
			return hd, err
		}
		req.Node = a.node // queued: wait for it
	}
	return a.wait(ctx, l, req)
}

// call sends req as MsgLockCall, which rides the mux stream: a lock
// granted at once costs no stream of its own. It returns the hold, or
// nil and no error when the request was queued (a.node names it).
func (a *acquisition) call(ctx context.Context, l *link, req *session.Request) (*hold, error) {
	a.attempts++
	lc := *req
	lc.Type, lc.TimeoutMillis = session.MsgLockCall, 0
	resp, err := session.RoundTrip(ctx, l.conn, &lc)
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		return nil, err
	}
	a.node = resp.Node
	if resp.Lock != session.LockGranted {
		a.queued = true
		return nil, nil
	}
	if ctx.Err() != nil {
		// ctx ended as the grant came: nobody will hold it.
		a.h.releaseLater(session.Request{Node: resp.Node})
		return nil, ctx.Err()
	}
	return a.h.take(resp, l)
}

// wait opens one MsgLock stream on l and reads it until the grant.
func (a *acquisition) wait(ctx context.Context, l *link, req *session.Request) (*hold, error) {
	h, c := a.h, a.h.c
	a.attempts++
	// The stream outlives ctx: after the grant it watches the lock. Until
	// then ctx ending resets it, which withdraws the request.
	sctx, scancel := context.WithCancel(c.ctx)
	sr, err := session.OpenStreaming(sctx, l.conn, req)
	if err != nil {
		scancel()
		return nil, err
	}
	stopOnCtx := context.AfterFunc(ctx, scancel)
	for {
		resp, err := sr.Next()
		if err != nil {
			stopOnCtx()
			scancel()
			return nil, err
		}
		switch resp.Lock {
		case session.LockQueued:
			a.node, a.queued = resp.Node, true
		case session.LockGranted:
			a.node = resp.Node
			// The server ended the stream at the grant: reading its end
			// (in the grant's packet) retires the stream without a reset.
			if _, err := sr.Next(); !errors.Is(err, io.EOF) {
				sr.Close()
			}
			scancel()
			if !stopOnCtx() {
				// ctx ended as the grant came: nobody will hold it.
				h.releaseLater(session.Request{Node: resp.Node})
				return nil, ctx.Err()
			}
			return h.take(resp, l)
		}
	}
}

// take makes the hold of a grant delivered on l, unless it came after
// the session's proven lease end: the session may have expired in
// between, so it is released instead.
func (h *lockHandle) take(resp *session.Response, l *link) (*hold, error) {
	if end := h.s.LeaseEnd(); h.now().After(end) {
		h.releaseLater(session.Request{Node: resp.Node})
		return nil, fmt.Errorf("%w: %s granted after the session's lease ended at %v; released", ErrLockLost, h.path, end.Format(time.RFC3339Nano))
	}
	hd := h.follow(resp, l)
	if hd == nil {
		return nil, ErrClosed
	}
	return hd, nil
}

// failed decides what a failed attempt means: done with the error to
// return, or retry.
func (a *acquisition) failed(ctx context.Context, l *link, req *session.Request, err error, hops redirects, idle *int) (bool, error) {
	h, c := a.h, a.h.c
	if ctx.Err() != nil {
		a.abandon()
		return true, fmt.Errorf("latch: lock %s: %w", h.path, ctx.Err())
	}
	if !isWire(err) {
		// The stream or the connection broke: the request may have been
		// applied, and was not withdrawn (the server only withdraws what
		// a live connection resets). Sending it again with its request id
		// finds it.
		if !isStreamErr(err) {
			c.drop(l, "", err)
			return false, nil
		}
		*idle++
		if !c.sleep(ctx, *idle) {
			a.abandon()
			return true, a.wrap(ctx, err)
		}
		return false, nil
	}
	switch {
	case errors.Is(err, ErrLocked), errors.Is(err, ErrTimeout):
		// Nothing queued (a try-lock), or the server withdrew it.
		if errors.Is(err, ErrTimeout) {
			return true, fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
		}
		return true, err
	case errors.Is(err, ErrNotHeld):
		// The request went away while we waited or re-attached (the
		// server withdrew it after a connection loss, someone deleted
		// its node): queue a new one while the session lives.
		a.node = ""
		*idle++
		if !c.sleep(ctx, *idle) {
			return true, a.wrap(ctx, err)
		}
		return false, nil
	case errors.Is(err, namespace.ErrClosed):
		// The member is stopping; the request may have been applied
		// (its request id finds it).
		c.drop(l, "", err)
		return false, nil
	case errors.Is(err, ErrUnknownOutcome):
		// The leader lost leadership while committing the request.
		*idle++
		if !c.sleep(ctx, *idle) {
			a.abandon()
			return true, a.wrap(ctx, err)
		}
		return false, nil
	}
	retry, err := c.onError(ctx, l, h.s, req, err, hops, idle)
	if !retry {
		a.abandon()
		return true, a.wrap(ctx, err)
	}
	return false, nil
}

// wrap explains a failure of Lock, keeping ctx's error visible.
func (a *acquisition) wrap(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("latch: lock %s: %w (%w)", a.h.path, err, ctx.Err())
	}
	return err
}

// abandon cleans up after a Lock that gave up: the client withdraws its
// request itself, in the background, by node, or by request id when the
// node is not known (nothing to withdraw if it never landed). A withdrawal
// releases the lock if it was granted meanwhile.
//
// The stream's reset is not enough, even on a live connection: the server
// withdraws on a reset only while it still waits. The stream ends at the
// grant, so a grant the server wrote before the reset reached it, and
// that this client never read, is held by nobody the server could know
// of; only the client knows that it did not deliver it. A reset the
// server did see makes this a second cancel, answered ErrNotHeld.
func (a *acquisition) abandon() {
	h := a.h
	switch {
	case a.node != "":
		h.releaseLater(session.Request{Node: a.node})
	case a.attempts > 0:
		h.releaseLater(session.Request{RequestID: a.reqID})
	}
}

// follow makes the hold of a grant and follows it: the client's
// lockFollower reports the server's notice of its end, and the session's
// end loses it too. It returns nil when the client is closed.
func (h *lockHandle) follow(resp *session.Response, l *link) *hold {
	hd := &hold{node: resp.Node, token: resp.Token, rev: resp.Rev, lost: make(chan struct{})}
	if !h.c.locks.add(h, hd, l) {
		return nil
	}
	return hd
}

// release runs Unlock.
func (h *lockHandle) release(ctx context.Context) error {
	if err := h.begin(false); err != nil {
		return err
	}
	defer h.end()
	h.mu.Lock()
	hd := h.cur
	h.mu.Unlock()
	if hd == nil {
		return fmt.Errorf("%w: %s is not locked by this lock", ErrNotHeld, h.path)
	}
	hd.mu.Lock()
	lost := hd.err
	hd.unlocking = lost == nil
	hd.mu.Unlock()
	// Released even when reported lost: a watch that gave up (rather
	// than the server saying so) may leave the lock held.
	err := h.releaseNow(ctx, hd.node)
	if err != nil && lost == nil {
		hd.mu.Lock()
		hd.unlocking = false
		hd.mu.Unlock()
		return err
	}
	h.c.locks.remove(hd.node)
	hd.stopContention()
	h.mu.Lock()
	h.cur = nil
	h.mu.Unlock()
	return lost
}

// releaseNow withdraws or releases node, retrying a release whose answer
// was lost: node names are never reused, so a second release can only
// find it gone. A node already gone counts as released.
func (h *lockHandle) releaseNow(ctx context.Context, node string) error {
	return h.withdraw(ctx, session.Request{Node: node})
}

// withdraw releases the request which names (Node, or RequestID when the
// node never came back: the server finds it, or finds none), retrying a
// release whose answer was lost.
func (h *lockHandle) withdraw(ctx context.Context, which session.Request) error {
	for {
		req := which
		req.Type = session.MsgLockRelease
		_, err := h.c.do(ctx, h.s, &req)
		switch {
		case err == nil, errors.Is(err, ErrNotHeld):
			return nil
		case errors.Is(err, ErrUnknownOutcome) && ctx.Err() == nil:
			continue
		case sessionGone(err), errors.Is(err, ErrSessionClosed), errors.Is(err, ErrClosed):
			return nil // the session's end released it
		}
		return err
	}
}

// releaseLater withdraws which in the background, for as long as the
// session lives: a request left behind would be held (or granted later)
// for the rest of the session's life, blocking every other locker, so a
// leader change or a reconnection that takes longer than one dial must
// not end the attempt. The session's end (or the client's) ends it: that
// releases the request anyway.
func (h *lockHandle) releaseLater(which session.Request) {
	h.c.goFunc(func() {
		ctx, cancel := h.s.lifeCtx()
		defer cancel()
		if err := h.withdraw(ctx, which); err != nil {
			h.c.log.Debug("latch: releasing an abandoned lock request failed; it ends with the session",
				"node", which.Node, "request_id", which.RequestID, "err", err)
		}
	})
}

// renew runs Renew.
func (h *lockHandle) renew(ctx context.Context) error {
	h.mu.Lock()
	hd := h.cur
	h.mu.Unlock()
	if hd == nil {
		return fmt.Errorf("%w: %s is not locked by this lock", ErrNotHeld, h.path)
	}
	if err := hd.lostErr(); err != nil {
		return err
	}
	for {
		_, err := h.c.do(ctx, h.s, &session.Request{Type: session.MsgLockRenew, Node: hd.node})
		if errors.Is(err, ErrUnknownOutcome) && ctx.Err() == nil {
			continue // renewing twice is renewing
		}
		return err
	}
}

// LockEvent is one entry of a lock's history (Client.LockHistory): a
// grant, or how a hold ended, with its token, session, identity and times.
type LockEvent = namespace.LockEvent

// LockHistory returns the recorded grants and ends of the locks on path,
// newest first: at most limit (0: all the cluster keeps, up to 10000),
// with subtree also those of locks below path. The cluster keeps a
// bounded window (the LockHistoryMax and LockHistoryMaxAgeMillis cluster
// settings).
func (c *Client) LockHistory(ctx context.Context, path string, subtree bool, limit int, opts ...ReadOption) ([]LockEvent, error) {
	o := buildRead(opts)
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgLockHistory, Path: path, Recursive: subtree,
		Limit: int32(min(limit, 1<<30)), Stale: o.stale})
	if err != nil {
		return nil, err
	}
	return resp.LockHistory, nil
}
