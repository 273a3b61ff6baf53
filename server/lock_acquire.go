package server

// The one lock acquisition engine: request (or re-attach), wait, withdraw
// and outcome, as every front runs it. The QUIC front (MsgLock streams
// and MsgLockCall, lock_stream.go and lock_requests.go) and the HTTP
// long poll (package httpapi, through api_member.go) differ only in how
// their caller learns of the request's progress and how it goes away:
// that is a lockCaller. Release and renew are the unary handlers
// (lock_requests.go), which the HTTP front calls too, after resolving a
// fencing token to its request node.

import (
	"fmt"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// lockAcquire is one acquisition as a front hands it to the engine.
type lockAcquire struct {
	path      string
	mode      session.LockMode
	session   uint64
	identity  string // the caller's, for the ACL check in Apply
	data      []byte
	holdTTL   int64 // milliseconds; 0 holds until released
	lockDelay int64 // milliseconds; 0 takes the cluster's default
	requestID string
	// node re-attaches to this request of the session instead of
	// proposing a new one (a client that lost its connection).
	node string
	// try: Apply grants the request in its own command or refuses it
	// (ErrLocked); nothing waits.
	try bool
	// wait bounds the wait (the request is then withdrawn, ErrTimeout);
	// 0 waits until the grant, the request's end or the caller's.
	wait time.Duration
	// noWait answers a queued request at once (MsgLockCall: the client
	// waits on a MsgLock{Node} stream).
	noWait bool
}

// lockOutcome is how an acquisition ended. node and rev are set once a
// request exists (also with an error: a wait that timed out names it).
type lockOutcome struct {
	node    string
	rev     uint64 // the request's revision (a retry's is the first request's)
	granted bool
	token   uint64
	// ended: the caller went away; there is nothing to answer.
	ended bool
}

// lockCaller is a front's side of one acquisition.
type lockCaller interface {
	// queued tells the caller its request waits, before the wait; an
	// error is a caller that went away.
	queued(node string, rev uint64) error
	// follow is called just before the grant is delivered: a front whose
	// connection is told of lost locks starts following node.
	follow(node string)
	// granted delivers the grant; an error is a caller that went away
	// without it.
	granted(o lockOutcome) error
	// done is closed when the caller goes away.
	done() <-chan struct{}
	// gaveUp reports, once the caller went away, whether it gave up on
	// the request (withdrawn) rather than lost its connection (the
	// request stays for a re-attach).
	gaveUp() bool
}

// checkAcquire checks an acquisition before anything is proposed.
func (l *lockService) checkAcquire(req *lockAcquire) error {
	switch {
	case req.session == 0:
		return fmt.Errorf("%w: a lock request needs a session", session.ErrUnknownSession)
	case req.wait < 0:
		return fmt.Errorf("%w: lock timeout %dms is negative", namespace.ErrBadCommand, req.wait.Milliseconds())
	}
	if err := checkLockMode(req.mode); err != nil {
		return err
	}
	if err := l.f.checkData(req.data); err != nil {
		return err
	}
	// Only the ready leader serves locks: a follower could not withdraw
	// a request, and a re-attach must see every committed grant.
	return l.f.keep.Serving()
}

// acquire runs one acquisition to its outcome: it proposes the request
// (or re-attaches to it), waits for the grant as req says, withdraws the
// request when the wait ends without one or the caller gave up, and
// delivers the grant through to. An error is the caller's answer.
func (l *lockService) acquire(req *lockAcquire, to lockCaller) (lockOutcome, error) {
	if err := l.checkAcquire(req); err != nil {
		return lockOutcome{}, err
	}
	var (
		w   *lockWaiter
		rev uint64
		err error
	)
	if req.node != "" {
		w, rev, err = l.reattach(req)
	} else {
		w, rev, err = l.request(req)
	}
	if err != nil {
		return lockOutcome{}, err
	}
	defer l.unregister(w)
	o := lockOutcome{node: w.node, rev: rev}
	if req.node == "" {
		select {
		case <-to.done():
			l.withdraw(w.node, req.session) // nobody learned the node
			o.ended = true
			return o, nil
		default:
		}
	}
	granted, token, err := l.outcome(w, req)
	switch {
	case err != nil:
		return o, err
	case !granted && req.noWait:
		return o, nil
	case !granted:
		if err := to.queued(o.node, o.rev); err != nil {
			return l.ended(o, req, to), nil
		}
		if token, err = l.wait(w, req, to); err != nil {
			return o, err
		}
		if token == 0 {
			return l.ended(o, req, to), nil
		}
	}
	// Followed from before the answer and while the waiter still sees a
	// loss: nothing can go away unseen in between.
	to.follow(w.node)
	if _, _, gone := w.state(); gone != "" {
		return o, fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
	}
	o.granted, o.token = true, token
	if err := to.granted(o); err != nil {
		o.granted = false
		return l.ended(o, req, to), nil
	}
	return o, nil
}

// ended handles a caller that went away: one that gave up takes its
// request with it; a lost connection or a stopping member leaves it for
// the client to re-attach.
func (l *lockService) ended(o lockOutcome, req *lockAcquire, to lockCaller) lockOutcome {
	if to.gaveUp() {
		l.withdraw(o.node, req.session)
	}
	o.ended = true
	return o
}

// request proposes req's lock request and returns its registered waiter
// (the caller unregisters it) and the request's revision.
func (l *lockService) request(req *lockAcquire) (*lockWaiter, uint64, error) {
	res, err := l.proposeLock(&namespace.Command{
		Op: namespace.OpLockRequest, Path: req.path, Mode: namespace.LockMode(req.mode), Session: req.session,
		HoldTTLMillis: req.holdTTL, LockDelayMillis: req.lockDelay, Data: req.data, Try: req.try,
		Identity: req.identity, RequestID: req.requestID,
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

// reattach registers a waiter for req.node, a request of req's session
// (on req.path, when given), and returns it and the request's revision.
func (l *lockService) reattach(req *lockAcquire) (*lockWaiter, uint64, error) {
	w := l.register(req.node)
	info, err := l.f.s.store.Lock(req.node)
	switch {
	case err != nil:
		err = lockWireError(err)
	case info.Session != req.session:
		err = fmt.Errorf("%w: %s belongs to session %d", session.ErrNotHeld, req.node, info.Session)
	case req.path != "" && info.Path != req.path:
		err = fmt.Errorf("%w: %s is a request on %s, not %s", namespace.ErrBadCommand, req.node, info.Path, req.path)
	case info.Granted:
		w.setGranted(info.Token)
	}
	if err != nil {
		l.unregister(w)
		return nil, 0, err
	}
	return w, info.Rev, nil
}

// outcome reads w's state once its request is proposed or re-attached:
// a request gone is ErrNotHeld, and a try-lock not granted is withdrawn
// and ErrLocked (apply grants a try-lock in its own command or refuses
// it, so this is one granted and already lost again).
func (l *lockService) outcome(w *lockWaiter, req *lockAcquire) (granted bool, token uint64, err error) {
	granted, token, gone := w.state()
	switch {
	case gone != "":
		return false, 0, fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
	case !granted && req.try:
		l.withdraw(w.node, req.session)
		return false, 0, fmt.Errorf("%w: %s (request %s withdrawn)", session.ErrLocked, req.path, w.node)
	}
	return granted, token, nil
}

// wait blocks until w's request is granted and returns its token. A
// token of 0 with no error means the caller went away (the caller of
// wait runs ended).
func (l *lockService) wait(w *lockWaiter, req *lockAcquire, to lockCaller) (uint64, error) {
	var timeout <-chan time.Time
	if req.wait > 0 {
		t := time.NewTimer(req.wait)
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
			l.withdraw(w.node, req.session)
			return 0, fmt.Errorf("%w: lock %s not granted within %dms (request withdrawn)", session.ErrTimeout, req.path, req.wait.Milliseconds())
		case <-to.done():
			return 0, nil
		}
	}
}
