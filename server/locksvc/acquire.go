package locksvc

// The one lock acquisition engine: request (or re-attach), wait, withdraw
// and outcome, as every front runs it. The QUIC front (MsgLock streams,
// server/lock_stream.go, and MsgLockCall, requests.go) and the HTTP long
// poll (package httpapi, through server/api_member.go) differ only in how
// their caller learns of the request's progress and how it goes away:
// that is a Caller. Release and renew are the unary handlers
// (requests.go), which the HTTP front calls too, after resolving a
// fencing token to its request node.

import (
	"fmt"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Acquire is one acquisition as a front hands it to the engine.
type Acquire struct {
	Path      string
	Mode      session.LockMode
	Session   uint64
	Identity  string // the caller's, for the ACL check in Apply
	Data      []byte
	HoldTTL   int64 // milliseconds; 0 holds until released
	LockDelay int64 // milliseconds; 0 takes the cluster's default
	RequestID string
	// Node re-attaches to this request of the session instead of
	// proposing a new one (a client that lost its connection).
	Node string
	// Try: Apply grants the request in its own command or refuses it
	// (ErrLocked); nothing waits.
	Try bool
	// Wait bounds the wait (the request is then withdrawn, ErrTimeout);
	// 0 waits until the grant, the request's end or the caller's.
	Wait time.Duration
	// NoWait answers a queued request at once (MsgLockCall: the client
	// waits on a MsgLock{Node} stream).
	NoWait bool
}

// Outcome is how an acquisition ended. Node and Rev are set once a
// request exists (also with an error: a wait that timed out names it).
type Outcome struct {
	Node    string
	Rev     uint64 // the request's revision (a retry's is the first request's)
	Granted bool
	Token   uint64
	// Ended: the caller went away; there is nothing to answer.
	Ended bool
}

// Caller is a front's side of one acquisition.
type Caller interface {
	// Queued tells the caller its request waits, before the wait, and
	// again when it becomes next in line (next: see doc.go); an error is
	// a caller that went away.
	Queued(node string, rev uint64, next bool) error
	// Follow is called just before the grant is delivered: a front whose
	// connection is told of lost locks starts following node.
	Follow(node string)
	// Granted delivers the grant; an error is a caller that went away
	// without it.
	Granted(o Outcome) error
	// Done is closed when the caller goes away.
	Done() <-chan struct{}
	// GaveUp reports, once the caller went away, whether it gave up on
	// the request (withdrawn) rather than lost its connection (the
	// request stays for a re-attach).
	GaveUp() bool
}

// checkAcquire checks an acquisition before anything is proposed.
func (l *Service) checkAcquire(req *Acquire) error {
	switch {
	case req.Session == 0:
		return fmt.Errorf("%w: a lock request needs a session", session.ErrUnknownSession)
	case req.Wait < 0:
		return fmt.Errorf("%w: lock timeout %dms is negative", namespace.ErrBadCommand, req.Wait.Milliseconds())
	}
	if err := checkLockMode(req.Mode); err != nil {
		return err
	}
	if err := l.p.Front.CheckData(req.Data); err != nil {
		return err
	}
	// Only the ready leader serves locks: a follower could not withdraw
	// a request, and a re-attach must see every committed grant.
	return l.p.Leases.Serving()
}

// Acquire runs one acquisition to its outcome: it proposes the request
// (or re-attaches to it), waits for the grant as req says, withdraws the
// request when the wait ends without one or the caller gave up, and
// delivers the grant through to. An error is the caller's answer.
func (l *Service) Acquire(req *Acquire, to Caller) (Outcome, error) {
	if err := l.checkAcquire(req); err != nil {
		return Outcome{}, err
	}
	var (
		w   *waiter
		rev uint64
		err error
	)
	if req.Node != "" {
		w, rev, err = l.reattach(req)
	} else {
		w, rev, err = l.request(req)
	}
	if err != nil {
		return Outcome{}, err
	}
	defer l.unregister(w)
	o := Outcome{Node: w.node, Rev: rev}
	if req.Node == "" {
		select {
		case <-to.Done():
			l.withdraw(w.node, req.Session) // nobody learned the node
			o.Ended = true
			return o, nil
		default:
		}
	}
	granted, token, err := l.outcome(w, req)
	switch {
	case err != nil:
		return o, err
	case !granted && req.NoWait:
		return o, nil
	case !granted:
		next := w.isNext()
		if err := to.Queued(o.Node, o.Rev, next); err != nil {
			return l.ended(o, req, to), nil
		}
		if token, err = l.wait(w, req, to, o.Rev, next); err != nil {
			return o, err
		}
		if token == 0 {
			return l.ended(o, req, to), nil
		}
	}
	// Followed from before the answer and while the waiter still sees a
	// loss: nothing can go away unseen in between.
	to.Follow(w.node)
	if _, _, gone := w.state(); gone != "" {
		return o, fmt.Errorf("%w: %s %s", session.ErrNotHeld, w.node, gone)
	}
	o.Granted, o.Token = true, token
	if err := to.Granted(o); err != nil {
		o.Granted = false
		return l.ended(o, req, to), nil
	}
	return o, nil
}

// ended handles a caller that went away: one that gave up takes its
// request with it; a lost connection or a stopping member leaves it for
// the client to re-attach.
func (l *Service) ended(o Outcome, req *Acquire, to Caller) Outcome {
	if to.GaveUp() {
		l.withdraw(o.Node, req.Session)
	}
	o.Ended = true
	return o
}

// request proposes req's lock request and returns its registered waiter
// (the caller unregisters it) and the request's revision.
func (l *Service) request(req *Acquire) (*waiter, uint64, error) {
	res, err := l.proposeLock(&namespace.Command{
		Op: namespace.OpLockRequest, Path: req.Path, Mode: namespace.LockMode(req.Mode), Session: req.Session,
		HoldTTLMillis: req.HoldTTL, LockDelayMillis: req.LockDelay, Data: req.Data, Try: req.Try,
		Identity: req.Identity, RequestID: req.RequestID,
	})
	if err != nil {
		return nil, 0, err
	}
	w := l.register(res.Path)
	// A grant applied between the proposal and the registration reached
	// no waiter: the index has it. A request gone already (its session
	// ended, its node was deleted) fails instead of leaving its caller
	// waiting for a grant that cannot come.
	info, err := l.p.Store.Lock(res.Path)
	switch {
	case err != nil:
		l.unregister(w)
		return nil, 0, fmt.Errorf("%w: %s went away before it was granted: %v", session.ErrNotHeld, res.Path, err)
	case info.Granted:
		w.setGranted(info.Token)
	default:
		l.checkNext(w, info.Path)
	}
	return w, res.Stat.CreateRev, nil // the request's revision: a retry's is the first request's
}

// reattach registers a waiter for req.Node, a request of req's session
// (on req.Path, when given), and returns it and the request's revision.
func (l *Service) reattach(req *Acquire) (*waiter, uint64, error) {
	w := l.register(req.Node)
	info, err := l.p.Store.Lock(req.Node)
	switch {
	case err != nil:
		err = WireError(err)
	case info.Session != req.Session:
		err = fmt.Errorf("%w: %s belongs to session %d", session.ErrNotHeld, req.Node, info.Session)
	case req.Path != "" && info.Path != req.Path:
		err = fmt.Errorf("%w: %s is a request on %s, not %s", namespace.ErrBadCommand, req.Node, info.Path, req.Path)
	case info.Granted:
		w.setGranted(info.Token)
	default:
		l.checkNext(w, info.Path)
	}
	if err != nil {
		l.unregister(w)
		return nil, 0, err
	}
	return w, info.Rev, nil
}

// checkNext marks w next when its request, on path, is next in line
// already. It runs after w is registered: a later move of the queue
// reaches w through Applied.
func (l *Service) checkNext(w *waiter, path string) {
	if node, ok := l.p.Store.NextInLine(path); ok && node == w.node {
		w.setNext()
	}
}

// outcome reads w's state once its request is proposed or re-attached:
// a request gone is ErrNotHeld, and a try-lock not granted is withdrawn
// and ErrLocked (apply grants a try-lock in its own command or refuses
// it, so this is one granted and already lost again).
func (l *Service) outcome(w *waiter, req *Acquire) (granted bool, token uint64, err error) {
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

// wait blocks until w's request is granted and returns its token. It
// tells the caller when the request becomes next in line, unless told
// already. A token of 0 with no error means the caller went away (the
// caller of wait runs ended).
func (l *Service) wait(w *waiter, req *Acquire, to Caller, rev uint64, told bool) (uint64, error) {
	var timeout <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
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
		case !told && w.isNext():
			told = true
			if err := to.Queued(w.node, rev, true); err != nil {
				return 0, nil
			}
		}
		select {
		case <-w.notify:
		case <-timeout:
			// A grant racing the timeout is released by the cancel.
			l.withdraw(w.node, req.Session)
			return 0, fmt.Errorf("%w: lock %s not granted within %dms (request withdrawn)", session.ErrTimeout, req.Path, req.Wait.Milliseconds())
		case <-to.Done():
			return 0, nil
		}
	}
}
