package server

// The lock requests of clients: the unary calls and the MsgLock stream
// that propose lock commands and tell their outcome, release, renew,
// sequencer checks and queue listings (lock.go has the whole design).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// lockWireError gives the namespace's "no such held lock" errors their
// one wire identity, session.ErrNotHeld, and keeps the namespace's
// message, which names the request. (ErrWouldDeadlock needs no mapping:
// session's is the namespace's.)
func lockWireError(err error) error {
	switch {
	case errors.Is(err, namespace.ErrNoLock), errors.Is(err, namespace.ErrNotLockOwner), errors.Is(err, namespace.ErrLockNotHeld):
		return &lockError{sentinel: session.ErrNotHeld, msg: err.Error()}
	}
	return err
}

// lockError is an error with the message of one error and the identity
// of another.
type lockError struct {
	sentinel error
	msg      string
}

func (e *lockError) Error() string { return e.msg }
func (e *lockError) Unwrap() error { return e.sentinel }

// proposeLock commits a lock command with a context of its own: a lock
// command abandoned half way (its client left) would leave a request
// nobody knows about, so it always runs to its end and the caller decides
// what to undo.
func (l *lockService) proposeLock(cmd *namespace.Command) (*namespace.Result, error) {
	ctx, cancel := context.WithTimeout(l.f.s.ctx, l.f.s.cfg.ApplyTimeout)
	defer cancel()
	res, err := l.f.propose(ctx, cmd)
	if err != nil {
		return res, lockWireError(err)
	}
	return res, nil
}

// withdraw cancels the request node of session (waiting or held) unless
// it is gone already. Failures are logged: the request then ends with its
// session, or the client withdraws it after re-attaching.
func (l *lockService) withdraw(node string, sessionID uint64) {
	if _, err := l.f.s.store.Lock(node); err != nil {
		return // gone (or the store is closing)
	}
	_, err := l.proposeLock(&namespace.Command{Op: namespace.OpLockCancel, Path: node, Session: sessionID, Withdrawn: true})
	if err != nil && !errors.Is(err, session.ErrNotHeld) {
		l.f.log.Debug("lock withdraw not committed", "node", node, "session", sessionID, "err", err)
	}
}

// clientReset reports whether the client reset str while its connection
// lives: it gave up on the request. A stream that ended with its
// connection is not a decision of the client.
func clientReset(c *clientConn, str *quic.Stream) bool {
	if c.conn.Context().Err() != nil {
		return false
	}
	var se *quic.StreamError
	return errors.As(context.Cause(str.Context()), &se) && se.Remote
}

func checkLockMode(m session.LockMode) error {
	if m != session.LockExclusive && m != session.LockShared {
		return fmt.Errorf("%w: lock mode %d", namespace.ErrBadCommand, m)
	}
	return nil
}

// checkRequest checks a MsgLock or MsgLockCall before anything is
// proposed.
func (l *lockService) checkRequest(req *session.Request) error {
	switch {
	case req.Session == 0:
		return fmt.Errorf("%w: a lock request needs a session", session.ErrUnknownSession)
	case req.TimeoutMillis < 0:
		return fmt.Errorf("%w: lock timeout %dms is negative", namespace.ErrBadCommand, req.TimeoutMillis)
	}
	if err := checkLockMode(req.Mode); err != nil {
		return err
	}
	if err := l.f.checkData(req.Data); err != nil {
		return err
	}
	// Only the ready leader serves locks: a follower could not withdraw
	// a request, and a re-attach must see every committed grant.
	return l.f.keep.serving()
}

// request proposes req's lock request and returns its registered waiter
// (the caller unregisters it) and the request's revision.
func (l *lockService) request(c *clientConn, req *session.Request) (*lockWaiter, uint64, error) {
	res, err := l.proposeLock(&namespace.Command{
		Op: namespace.OpLockRequest, Path: req.Path, Mode: namespace.LockMode(req.Mode), Session: req.Session,
		HoldTTLMillis: req.HoldTTLMillis, LockDelayMillis: req.LockDelayMillis, Data: req.Data, Try: req.Try,
		Identity: c.identity, RequestID: req.RequestID,
	})
	if err != nil {
		return nil, 0, err
	}
	w := l.register(res.Path)
	// A grant applied between the proposal and the registration reached
	// no waiter: the index has it. A request gone already (its session
	// ended, its node was deleted) fails instead of leaving its caller
	// waiting for a grant that cannot come.
	info, err := l.f.s.store.Lock(res.Path)
	switch {
	case err != nil:
		l.unregister(w)
		return nil, 0, fmt.Errorf("%w: %s went away before it was granted: %v", session.ErrNotHeld, res.Path, err)
	case info.Granted:
		w.setGranted(info.Token)
	}
	return w, res.Stat.CreateRev, nil // the request's revision: a retry's is the first request's
}

// followGranted follows w's granted request for c, from before the
// answer and while the waiter still sees a loss: nothing can go away
// unseen in between.
func (l *lockService) followGranted(c *clientConn, w *lockWaiter) error {
	l.follow(c, w.node)
	if _, _, gone := w.state(); gone != "" {
		return fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
	}
	return nil
}

// call handles MsgLockCall: the request is proposed as by MsgLock and
// answered at once, granted or queued; a queued request is waited for
// on a MsgLock{Node} stream.
func (l *lockService) call(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if req.Node != "" {
		return nil, fmt.Errorf("%w: a lock call cannot re-attach to %s (MsgLock does)", namespace.ErrBadCommand, req.Node)
	}
	if err := l.checkRequest(req); err != nil {
		return nil, err
	}
	w, rev, err := l.request(c, req)
	if err != nil {
		return nil, err
	}
	defer l.unregister(w)
	if ctx.Err() != nil {
		// The client cancelled the call (or left): nobody learns the
		// node. (It withdraws the request by its id too.)
		l.withdraw(w.node, req.Session)
		return nil, ctx.Err()
	}
	granted, token, err := l.outcome(w, req)
	switch {
	case err != nil:
		return nil, err
	case !granted:
		return &session.Response{Lock: session.LockQueued, Node: w.node, Rev: rev}, nil
	}
	if err := l.followGranted(c, w); err != nil {
		return nil, err
	}
	return &session.Response{Lock: session.LockGranted, Node: w.node, Token: token, Rev: rev}, nil
}

// outcome reads w's state once its request is proposed or re-attached:
// a request gone is ErrNotHeld, and a try-lock not granted is withdrawn
// and ErrLocked (apply grants a try-lock in its own command or refuses
// it, so this is one granted and already lost again).
func (l *lockService) outcome(w *lockWaiter, req *session.Request) (granted bool, token uint64, err error) {
	granted, token, gone := w.state()
	switch {
	case gone != "":
		return false, 0, fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
	case !granted && req.Try:
		l.withdraw(w.node, req.Session)
		return false, 0, fmt.Errorf("%w: %s (request %s withdrawn)", session.ErrLocked, req.Path, w.node)
	}
	return granted, token, nil
}

// serveLock runs one MsgLock stream: request (or re-attach), wait, grant,
// then watch the held lock until it goes away.
func (l *lockService) serveLock(ctx context.Context, c *clientConn, str *quic.Stream, req *session.Request) error {
	if err := l.checkRequest(req); err != nil {
		return err
	}
	var (
		w   *lockWaiter
		rev uint64
	)
	if req.Node != "" {
		w = l.register(req.Node)
		defer l.unregister(w)
		info, err := l.f.s.store.Lock(req.Node)
		switch {
		case err != nil:
			return lockWireError(err)
		case info.Session != req.Session:
			return fmt.Errorf("%w: %s belongs to session %d", session.ErrNotHeld, req.Node, info.Session)
		case req.Path != "" && info.Path != req.Path:
			return fmt.Errorf("%w: %s is a request on %s, not %s", namespace.ErrBadCommand, req.Node, info.Path, req.Path)
		case info.Granted:
			w.setGranted(info.Token)
		}
		rev = info.Rev
	} else {
		var err error
		if w, rev, err = l.request(c, req); err != nil {
			return err
		}
		defer l.unregister(w)
		if str.Context().Err() != nil {
			l.withdraw(w.node, req.Session) // nobody learned the node
			return nil
		}
	}
	granted, token, err := l.outcome(w, req)
	if err != nil {
		return err
	}
	if !granted {
		if err := session.WriteResponse(str, &session.Response{Lock: session.LockQueued, Node: w.node, Rev: rev}); err != nil {
			l.ended(c, str, w.node, req.Session)
			return nil
		}
		if token, err = l.wait(ctx, c, str, w, req); err != nil || token == 0 {
			return err
		}
	}
	if err := l.followGranted(c, w); err != nil {
		return err
	}
	if err := session.WriteResponse(str, &session.Response{Lock: session.LockGranted, Node: w.node, Token: token, Rev: rev}); err != nil {
		l.ended(c, str, w.node, req.Session)
		return nil
	}
	// The stream ends with the grant, its FIN in the grant's packet (the
	// client reads it): a held lock is no request in flight.
	_ = str.Close()
	return nil
}

// wait blocks until w's request is granted and returns its token. A
// token of 0 with no error means the stream ended and there is nothing
// to answer.
func (l *lockService) wait(ctx context.Context, c *clientConn, str *quic.Stream, w *lockWaiter, req *session.Request) (uint64, error) {
	var timeout <-chan time.Time
	if req.TimeoutMillis > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMillis) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	for {
		granted, token, gone := w.state()
		switch {
		case gone != "":
			return 0, fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
		case granted:
			return token, nil
		}
		select {
		case <-w.notify:
		case <-timeout:
			// A grant racing the timeout is released by the cancel.
			l.withdraw(w.node, req.Session)
			return 0, fmt.Errorf("%w: lock %s not granted within %dms (request withdrawn)", session.ErrTimeout, req.Path, req.TimeoutMillis)
		case <-ctx.Done():
			l.ended(c, str, w.node, req.Session)
			return 0, nil
		}
	}
}

// ended handles a lock stream that ended from the client's side or with
// the member: a client that reset it gave up, so its request goes; a lost
// connection or a stopping member leaves it for the client to re-attach.
func (l *lockService) ended(c *clientConn, str *quic.Stream, node string, sessionID uint64) {
	if clientReset(c, str) {
		l.withdraw(node, sessionID)
	}
}

// release handles MsgLockRelease: the lock request Node goes, held or
// waiting.
func (l *lockService) release(_ context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if req.Node == "" && req.RequestID == "" {
		return nil, fmt.Errorf("%w: release names no request node or request id", namespace.ErrBadCommand)
	}
	if err := l.f.keep.serving(); err != nil {
		return nil, err
	}
	node := req.Node
	if node == "" {
		// The client never learned the node (a lost answer): its request
		// id names it, or nothing was queued.
		n, ok, err := l.f.s.store.LockByRequestID(req.Session, req.RequestID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: no lock request %q of session %d", session.ErrNotHeld, req.RequestID, req.Session)
		}
		node = n
	}
	defer l.releaseBy(c, node)()
	res, err := l.proposeLock(&namespace.Command{Op: namespace.OpLockCancel, Path: node, Session: req.Session, Identity: c.identity})
	if err != nil {
		return nil, err
	}
	return &session.Response{Rev: res.Index}, nil
}

// renew handles MsgLockRenew: the hold TTL of Node starts again, as
// HoldTTLMillis when set; TTLMillis, when set, becomes the session's TTL
// (clamped into the session bounds, as at open) and restarts its lease.
func (l *lockService) renew(_ context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if req.Node == "" {
		return nil, fmt.Errorf("%w: renew names no request node", namespace.ErrBadCommand)
	}
	if err := l.f.keep.serving(); err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpLockRenew, Path: req.Node, Session: req.Session, Identity: c.identity, HoldTTLMillis: req.HoldTTLMillis}
	var sessionTTL time.Duration
	if req.TTLMillis != 0 {
		ttl, err := l.f.grantTTL(req.TTLMillis)
		if err != nil {
			return nil, err
		}
		sessionTTL, cmd.TTLMillis = ttl, ttl.Milliseconds()
	}
	res, err := l.proposeLock(cmd)
	if err != nil {
		return nil, err
	}
	if sessionTTL != 0 && !l.f.keep.retime(req.Session, sessionTTL) {
		return nil, fmt.Errorf("%w: session %d", session.ErrSessionExpired, req.Session)
	}
	resp := &session.Response{Rev: res.Index}
	if info, err := l.f.s.store.Lock(req.Node); err == nil {
		resp.TTLMillis = info.HoldTTLMillis
	}
	return resp, nil
}

// checkSequencer handles MsgCheckSequencer with a linearizable read
// (unless Stale).
func (l *lockService) checkSequencer(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	sq := req.Sequencer
	if sq == nil {
		return nil, fmt.Errorf("%w: check names no sequencer", namespace.ErrBadCommand)
	}
	if err := checkLockMode(sq.Mode); err != nil {
		return nil, err
	}
	rev, err := l.f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.f.canRead(c, sq.Path); err != nil {
		return nil, err
	}
	ok, err := l.f.s.store.CheckSequencer(sq.Path, namespace.LockMode(sq.Mode), sq.Token, sq.Session)
	if err != nil {
		return nil, err
	}
	return &session.Response{Valid: ok, Rev: rev}, nil
}

// queue handles MsgLockQueue.
func (l *lockService) queue(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	rev, err := l.f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.f.canRead(c, req.Path); err != nil {
		return nil, err
	}
	infos, err := l.f.s.store.LockQueue(req.Path)
	if err != nil {
		return nil, err
	}
	resp := &session.Response{Rev: rev, Locks: make([]session.LockInfo, 0, min(len(infos), maxListedLocks))}
	budget := l.f.s.cfg.Transport.MaxFrameSize / 2
	for _, q := range infos {
		if l.f.s.store.Authorize(c.identity, q.Node, namespace.PermRead) != nil {
			continue // a rule denies part of the subtree
		}
		size := 96 + len(q.Node) + len(q.Path)
		if len(resp.Locks) == maxListedLocks || budget < size {
			resp.More = true
			break
		}
		budget -= size
		resp.Locks = append(resp.Locks, session.LockInfo{
			Node: q.Node, Path: q.Path, Mode: session.LockMode(q.Mode), Session: q.Session, Rev: q.Rev,
			HoldTTLMillis: q.HoldTTLMillis, LockDelayMillis: q.LockDelayMillis,
			Granted: q.Granted, Token: q.Token, GrantTime: q.GrantTime, Deadline: q.Deadline,
			Phantom: q.Phantom, DelayEnd: q.DelayEnd,
		})
	}
	return resp, nil
}
