package client

// The lock engine Mutex, RWMutex and Election share: one lock request's
// life on the client (acquire, hold, release, renew), its current hold and
// how that is lost (mutex.go has the protocol).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latch-io/latch/session"
)

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
	h.c.goFunc(func() { h.withdrawInBackground(which) })
}

// withdrawInBackground is releaseLater's work, on the caller's goroutine.
func (h *lockHandle) withdrawInBackground(which session.Request) {
	ctx, cancel := h.s.lifeCtx()
	defer cancel()
	if err := h.withdraw(ctx, which); err != nil {
		h.c.log.Debug("latch: releasing an abandoned lock request failed; it ends with the session",
			"node", which.Node, "request_id", which.RequestID, "err", err)
	}
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
