package server

// The unary lock requests of clients: MsgLockCall (through the
// acquisition engine, lock_acquire.go), release, renew, sequencer checks
// and queue listings (lock.go has the whole design).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

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

func checkLockMode(m session.LockMode) error {
	if m != session.LockExclusive && m != session.LockShared {
		return fmt.Errorf("%w: lock mode %d", namespace.ErrBadCommand, m)
	}
	return nil
}

// acquisition is the engine's request for a MsgLock or MsgLockCall. A
// timeout beyond a Duration is clamped, not wrapped: a huge one waits
// unbounded, a huge negative one stays negative (refused).
func acquisition(c *clientConn, req *session.Request) *lockAcquire {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	wait := time.Duration(min(max(req.TimeoutMillis, -limit), limit)) * time.Millisecond
	return &lockAcquire{
		path: req.Path, mode: req.Mode, session: req.Session, identity: c.identity, data: req.Data,
		holdTTL: req.HoldTTLMillis, lockDelay: req.LockDelayMillis, requestID: req.RequestID,
		node: req.Node, try: req.Try, wait: wait,
	}
}

// callCaller is a MsgLockCall as the engine's caller: the call's answer
// tells the outcome, and a call cancelled is a client that gave up.
type callCaller struct {
	ctx context.Context
	c   *clientConn
	l   *lockService
}

func (k callCaller) queued(string, uint64) error { return nil } // noWait: never called
func (k callCaller) follow(node string)          { k.l.follow(k.c, node) }
func (k callCaller) granted(lockOutcome) error   { return nil } // the answer carries it
func (k callCaller) done() <-chan struct{}       { return k.ctx.Done() }
func (k callCaller) gaveUp() bool                { return true }

// call handles MsgLockCall: the request is proposed as by MsgLock and
// answered at once, granted or queued; a queued request is waited for
// on a MsgLock{Node} stream.
func (l *lockService) call(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if req.Node != "" {
		return nil, fmt.Errorf("%w: a lock call cannot re-attach to %s (MsgLock does)", namespace.ErrBadCommand, req.Node)
	}
	a := acquisition(c, req)
	a.noWait = true
	o, err := l.acquire(a, callCaller{ctx: ctx, c: c, l: l})
	switch {
	case err != nil:
		return nil, err
	case o.ended:
		// The client cancelled the call (or left): nobody learns the
		// node. (It withdraws the request by its id too.)
		return nil, ctx.Err()
	case !o.granted:
		return &session.Response{Lock: session.LockQueued, Node: o.node, Rev: o.rev}, nil
	}
	return &session.Response{Lock: session.LockGranted, Node: o.node, Token: o.token, Rev: o.rev}, nil
}

// release handles MsgLockRelease: the lock request Node goes, held or
// waiting.
func (l *lockService) release(_ context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if req.Node == "" && req.RequestID == "" {
		return nil, fmt.Errorf("%w: release names no request node or request id", namespace.ErrBadCommand)
	}
	if err := l.f.keep.Serving(); err != nil {
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
	if err := l.f.keep.Serving(); err != nil {
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
	if sessionTTL != 0 && !l.f.keep.Retime(req.Session, sessionTTL) {
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
