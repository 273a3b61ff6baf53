package locksvc

// The unary lock requests of clients: MsgLockCall (through the
// acquisition engine, acquire.go), release, renew, sequencer checks and
// queue listings (doc.go has the whole design).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// WireError gives the namespace's "no such held lock" errors their
// one wire identity, session.ErrNotHeld, and keeps the namespace's
// message, which names the request. (ErrWouldDeadlock needs no mapping:
// session's is the namespace's.)
func WireError(err error) error {
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
func (l *Service) proposeLock(cmd *namespace.Command) (*namespace.Result, error) {
	ctx, cancel := context.WithTimeout(l.p.Proposer.Context(), l.cfg.ApplyTimeout)
	defer cancel()
	res, err := l.p.Proposer.Propose(ctx, cmd)
	if err != nil {
		return nil, WireError(err)
	}
	if res.Err != nil { // the namespace's rejection
		return res, WireError(res.Err)
	}
	return res, nil
}

// withdraw cancels the request node of session (waiting or held) unless
// it is gone already. Failures are logged: the request then ends with its
// session, or the client withdraws it after re-attaching.
func (l *Service) withdraw(node string, sessionID uint64) {
	if _, err := l.p.Store.Lock(node); err != nil {
		return // gone (or the store is closing)
	}
	_, err := l.proposeLock(&namespace.Command{Op: namespace.OpLockCancel, Path: node, Session: sessionID, Withdrawn: true})
	if err != nil && !errors.Is(err, session.ErrNotHeld) {
		l.p.Log.Debug("lock withdraw not committed", "node", node, "session", sessionID, "err", err)
	}
}

func checkLockMode(m session.LockMode) error {
	if m != session.LockExclusive && m != session.LockShared {
		return fmt.Errorf("%w: lock mode %d", namespace.ErrBadCommand, m)
	}
	return nil
}

// Acquisition is the engine's request for a MsgLock or MsgLockCall. A
// timeout beyond a Duration is clamped, not wrapped: a huge one waits
// unbounded, a huge negative one stays negative (refused).
func Acquisition(c Conn, req *session.Request) *Acquire {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	wait := time.Duration(min(max(req.TimeoutMillis, -limit), limit)) * time.Millisecond
	return &Acquire{
		Path: req.Path, Mode: req.Mode, Session: req.Session, Identity: c.Identity(), Data: req.Data,
		HoldTTL: req.HoldTTLMillis, LockDelay: req.LockDelayMillis, RequestID: req.RequestID,
		Node: req.Node, Try: req.Try, Wait: wait,
	}
}

// callCaller is a MsgLockCall as the engine's caller: the call's answer
// tells the outcome, and a call cancelled is a client that gave up.
type callCaller struct {
	ctx context.Context
	c   Conn
	l   *Service
}

func (k callCaller) Queued(string, uint64, bool) error { return nil } // NoWait: never called
func (k callCaller) Follow(node string)                { k.l.Follow(k.c, node) }
func (k callCaller) Granted(Outcome) error             { return nil } // the answer carries it
func (k callCaller) Done() <-chan struct{}             { return k.ctx.Done() }
func (k callCaller) GaveUp() bool                      { return true }

// Call handles MsgLockCall: the request is proposed as by MsgLock and
// answered at once, granted or queued; a queued request is waited for
// on a MsgLock{Node} stream.
func (l *Service) Call(ctx context.Context, c Conn, req *session.Request) (*session.Response, error) {
	if req.Node != "" {
		return nil, fmt.Errorf("%w: a lock call cannot re-attach to %s (MsgLock does)", namespace.ErrBadCommand, req.Node)
	}
	a := Acquisition(c, req)
	a.NoWait = true
	o, err := l.Acquire(a, callCaller{ctx: ctx, c: c, l: l})
	switch {
	case err != nil:
		return nil, err
	case o.Ended:
		// The client cancelled the call (or left): nobody learns the
		// node. (It withdraws the request by its id too.)
		return nil, ctx.Err()
	case !o.Granted:
		return &session.Response{Lock: session.LockQueued, Node: o.Node, Rev: o.Rev}, nil
	}
	return &session.Response{Lock: session.LockGranted, Node: o.Node, Token: o.Token, Rev: o.Rev}, nil
}

// Release handles MsgLockRelease: the lock request Node goes, held or
// waiting.
func (l *Service) Release(_ context.Context, c Conn, req *session.Request) (*session.Response, error) {
	if req.Node == "" && req.RequestID == "" {
		return nil, fmt.Errorf("%w: release names no request node or request id", namespace.ErrBadCommand)
	}
	if err := l.p.Leases.Serving(); err != nil {
		return nil, err
	}
	node := req.Node
	if node == "" {
		// The client never learned the node (a lost answer): its request
		// id names it, or nothing was queued.
		n, ok, err := l.p.Store.LockByRequestID(req.Session, req.RequestID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: no lock request %q of session %d", session.ErrNotHeld, req.RequestID, req.Session)
		}
		node = n
	}
	defer l.releaseBy(c, node)()
	res, err := l.proposeLock(&namespace.Command{Op: namespace.OpLockCancel, Path: node, Session: req.Session, Identity: c.Identity()})
	if err != nil {
		return nil, err
	}
	return &session.Response{Rev: res.Index}, nil
}

// Renew handles MsgLockRenew: the hold TTL of Node starts again, as
// HoldTTLMillis when set; TTLMillis, when set, becomes the session's TTL
// (clamped into the session bounds, as at open) and restarts its lease.
func (l *Service) Renew(_ context.Context, c Conn, req *session.Request) (*session.Response, error) {
	if req.Node == "" {
		return nil, fmt.Errorf("%w: renew names no request node", namespace.ErrBadCommand)
	}
	if err := l.p.Leases.Serving(); err != nil {
		return nil, err
	}
	cmd := &namespace.Command{Op: namespace.OpLockRenew, Path: req.Node, Session: req.Session, Identity: c.Identity(), HoldTTLMillis: req.HoldTTLMillis}
	var sessionTTL time.Duration
	if req.TTLMillis != 0 {
		ttl, err := l.p.Front.GrantTTL(req.TTLMillis)
		if err != nil {
			return nil, err
		}
		sessionTTL, cmd.TTLMillis = ttl, ttl.Milliseconds()
	}
	res, err := l.proposeLock(cmd)
	if err != nil {
		return nil, err
	}
	if sessionTTL != 0 && !l.p.Leases.Retime(req.Session, sessionTTL) {
		return nil, fmt.Errorf("%w: session %d", session.ErrSessionExpired, req.Session)
	}
	resp := &session.Response{Rev: res.Index}
	if info, err := l.p.Store.Lock(req.Node); err == nil {
		resp.TTLMillis = info.HoldTTLMillis
	}
	return resp, nil
}

// CheckSequencer handles MsgCheckSequencer with a linearizable read
// (unless Stale).
func (l *Service) CheckSequencer(ctx context.Context, c Conn, req *session.Request) (*session.Response, error) {
	sq := req.Sequencer
	if sq == nil {
		return nil, fmt.Errorf("%w: check names no sequencer", namespace.ErrBadCommand)
	}
	if err := checkLockMode(sq.Mode); err != nil {
		return nil, err
	}
	rev, err := l.p.Front.ReadAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.p.Front.CanRead(c, sq.Path); err != nil {
		return nil, err
	}
	ok, err := l.p.Store.CheckSequencer(sq.Path, namespace.LockMode(sq.Mode), sq.Token, sq.Session)
	if err != nil {
		return nil, err
	}
	return &session.Response{Valid: ok, Rev: rev}, nil
}

// Queue handles MsgLockQueue.
func (l *Service) Queue(ctx context.Context, c Conn, req *session.Request) (*session.Response, error) {
	rev, err := l.p.Front.ReadAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.p.Front.CanRead(c, req.Path); err != nil {
		return nil, err
	}
	infos, err := l.p.Store.LockQueue(req.Path)
	if err != nil {
		return nil, err
	}
	resp := &session.Response{Rev: rev, Locks: make([]session.LockInfo, 0, min(len(infos), maxListedLocks))}
	budget := l.cfg.MaxFrameSize / 2
	for _, q := range infos {
		if l.p.Store.Authorize(c.Identity(), q.Node, namespace.PermRead) != nil {
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
