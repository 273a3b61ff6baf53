package client

// One Lock call's acquisition: the call or stream it sends, re-attaching
// after broken connections and leader changes, until the lock is granted or
// the call fails (mutex.go has the protocol).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// acquisition is one Lock call's state across attempts.
type acquisition struct {
	h   *lockHandle
	try bool

	reqID    string // names the request across retries (the server's idempotency key)
	node     string // the request node, once known
	attempts int    // calls sent and streams opened
	stream   bool   // send the request on a stream, not as a call (see lockHandle.waited)
	queued   bool   // the request waited in the queue
	// unanswered: the answer of a call that ctx ended before it came
	// (call); abandon withdraws the node it names.
	unanswered <-chan callAnswer
}

// callAnswer is the answer of one MsgLockCall.
type callAnswer struct {
	resp *session.Response
	err  error
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
//
// The call is not cancelled when ctx ends: its answer, which comes once
// the request is applied, is the only way to withdraw it safely. A call
// cancelled while its request is being committed, with a withdrawal by
// request id sent alongside, raced the commit: the withdrawal could be
// served before the request was applied (finding none, so done), and
// the cancel after the server's last look at the call before answering
// (so the server did not withdraw it either); the request then stayed
// queued, and was granted to nobody. So a Lock whose ctx ends returns
// at once, and abandon waits for the answer in the background and
// withdraws the node it names, after the request is applied.
func (a *acquisition) call(ctx context.Context, l *link, req *session.Request) (*hold, error) {
	a.attempts++
	lc := *req
	lc.Type, lc.TimeoutMillis = session.MsgLockCall, 0
	answer := make(chan callAnswer, 1)
	c := a.h.c
	if !c.goFunc(func() {
		resp, err := session.RoundTrip(c.ctx, l.conn, &lc)
		if err == nil {
			err = resp.Err()
		}
		answer <- callAnswer{resp: resp, err: err}
	}) {
		return nil, ErrClosed
	}
	var an callAnswer
	select {
	case an = <-answer:
	case <-ctx.Done():
		a.unanswered = answer
		return nil, ctx.Err()
	}
	resp, err := an.resp, an.err
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
	// A member that says which waiter is next in line lets the ones
	// further back wait like subscriptions, without pings: with hundreds
	// of waiters their pings cost the leader more than the handoffs. The
	// stream counts as waiting until its first frame says where it is.
	lineKnown := l.features&session.FeatureLockNext != 0
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
			if lineKnown {
				sr.Waiting(resp.Next)
			}
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
	case a.unanswered != nil:
		// A call ctx ended before its answer: the answer names the node
		// (see call); without one (the call failed), the request id.
		answer, reqID := a.unanswered, a.reqID
		h.c.goFunc(func() {
			an := <-answer
			which := session.Request{RequestID: reqID}
			if an.err == nil && an.resp.Node != "" {
				which = session.Request{Node: an.resp.Node}
			}
			h.withdrawInBackground(which)
		})
	case a.node != "":
		h.releaseLater(session.Request{Node: a.node})
	case a.attempts > 0:
		h.releaseLater(session.Request{RequestID: a.reqID})
	}
}
