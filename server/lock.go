package server

// Locks over the wire. The lock state machine lives in namespace
// (OpLockRequest, OpLockCancel, OpLockRelease, OpLockRenew; grants happen
// inside Apply); this file connects it to clients and to time:
//
//   - MsgLockCall proposes a request as a unary call (on the mux stream)
//     and answers at once: granted, with the token, or queued, and the
//     client then waits on a MsgLock{Node} stream. A free lock, the
//     common case, costs no stream of its own.
//   - MsgLock proposes a request and streams its progress. Waiters are
//     keyed by their request node in a registry fed by the apply observer:
//     a grant wakes exactly the stream of the request granted, never the
//     other waiters (no herd).
//   - The stream ends at the grant: a held lock is not a request in
//     flight and costs no request slot, no stream and no goroutine. The
//     member follows it for the connection it was granted to (held, by
//     node) and, when it goes away (hold TTL, node deleted, session
//     ended, released), queues a notice for that connection, delivered on
//     its one MsgLockNotices stream, so a client learns at once that it
//     lost a lock. A held lock costs the member two map entries. A release
//     that the following connection asked for itself (MsgLockRelease) is
//     no news to it: its answer says so, and no notice follows.
//   - A stream the client resets while its connection lives is a client
//     that gave up: the request is withdrawn, or the lock released when
//     the grant raced the reset (OpLockCancel does both). A reset that
//     comes after the grant was written finds the stream ended: the
//     member cannot tell it from a delivered grant, so the client, which
//     knows it did not deliver the grant, withdraws the request itself
//     (MsgLockRelease) whenever a Lock gives up. A lost
//     connection leaves the request in place: the client re-attaches to
//     it with MsgLock{Node} on whichever member leads next, keeping its
//     place in the queue; if the client is gone for good, its session
//     expires and takes the request with it.
//   - A request whose proposal commits after its stream ended is
//     withdrawn at once: nobody learned its node. (A client that lost
//     the answer to a failover sends it again with its RequestID and gets
//     the request the cluster has.)
//   - The leader proposes ticks (OpNoop stamped with its clock) when the
//     namespace's NextTimer is due, so lock-delays end and hold TTLs
//     expire through the log. The loop wakes after every applied batch
//     that granted or lost a lock and runs only while this member is the
//     ready leader.
//
// Lock-delay defaults and bounds are the replicated cluster settings
// DefaultLockDelayMillis (5s) and MaxLockDelayMillis (60s); settings.go.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// maxListedLocks bounds a LockQueue answer; More says the list was cut.
const maxListedLocks = 10000

// tickBurst is how many ticks the leader proposes back to back (grants
// left over from full batches) before it pauses for ExpiryTick, a guard
// against a loop that would make no progress.
const tickBurst = 1000

// lockService serves the lock requests of one member.
type lockService struct {
	f *front

	mu      sync.Mutex
	waiters map[string]map[*lockWaiter]struct{} // by request node
	held    map[string]*connLocks               // granted requests followed, by node
	conns   map[*clientConn]*connLocks

	wake chan struct{} // capacity 1: an applied batch may have moved NextTimer
}

// lockWaiter is one MsgLock stream's view of its request: granted (with
// the token) and then gone, with the reason. The observer writes it, the
// stream's handler reads it after notify.
type lockWaiter struct {
	node   string
	notify chan struct{} // capacity 1

	mu      sync.Mutex
	granted bool
	token   uint64
	gone    string // why the request went away; "" while it lives
}

func (w *lockWaiter) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *lockWaiter) setGranted(token uint64) {
	w.mu.Lock()
	if !w.granted && w.gone == "" {
		w.granted, w.token = true, token
	}
	w.mu.Unlock()
	w.signal()
}

// setGone records why the request went away. A later, more precise
// reason (released, lost) replaces "deleted": the node's Deleted event
// comes first in a command's events.
func (w *lockWaiter) setGone(why string) {
	w.mu.Lock()
	if w.gone == "" || w.gone == goneDeleted {
		w.gone = why
	}
	w.mu.Unlock()
	w.signal()
}

func (w *lockWaiter) state() (granted bool, token uint64, gone string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.granted, w.token, w.gone
}

// connLocks is what a connection was granted: the held locks followed for
// it and the notices of those that went away, waiting for its notices
// stream. Both are bounded by the locks granted to the connection.
type connLocks struct {
	nodes map[string]struct{}
	// releasing: the nodes this connection asked to release (MsgLockRelease
	// in flight); their release is not noticed to it.
	releasing map[string]int
	pending   []session.Response
	wake      chan struct{} // capacity 1
	streaming bool          // a MsgLockNotices stream is open
}

// follow makes c the connection told when node goes away (a re-attach
// from another connection moves it).
func (l *lockService) follow(c *clientConn, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.held[node]; old != nil {
		delete(old.nodes, node)
	}
	cl := l.connState(c)
	cl.nodes[node] = struct{}{}
	l.held[node] = cl
}

// connState returns c's lock state, made on first use. l.mu is held.
func (l *lockService) connState(c *clientConn) *connLocks {
	cl := l.conns[c]
	if cl == nil {
		cl = &connLocks{nodes: map[string]struct{}{}, releasing: map[string]int{}, wake: make(chan struct{}, 1)}
		l.conns[c] = cl
	}
	return cl
}

// connClosed forgets what c followed: its client re-attaches to its
// held locks on its next connection.
func (l *lockService) connClosed(c *clientConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.conns[c]
	if cl == nil {
		return
	}
	for node := range cl.nodes {
		if l.held[node] == cl {
			delete(l.held, node)
		}
	}
	delete(l.conns, c)
}

// gone queues the notice that node went away for the connection that
// follows it, unless that connection released it itself. l.mu is held.
func (l *lockService) gone(node, why string) {
	cl := l.held[node]
	if cl == nil {
		return
	}
	delete(l.held, node)
	delete(cl.nodes, node)
	if why == goneReleased && cl.releasing[node] > 0 {
		return
	}
	cl.pending = append(cl.pending, session.Response{Lock: session.LockGone, Node: node, Message: why})
	select {
	case cl.wake <- struct{}{}:
	default:
	}
}

// releaseBy marks node as being released by c's own request until the
// returned func runs: its release is then not noticed to c. A connection
// that follows no lock has nothing to mark.
func (l *lockService) releaseBy(c *clientConn, node string) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.conns[c]
	if cl == nil {
		return func() {}
	}
	cl.releasing[node]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if cl.releasing[node]--; cl.releasing[node] <= 0 {
			delete(cl.releasing, node)
		}
	}
}

// heldCount is the number of held locks followed (metrics, tests).
func (l *lockService) heldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// serveNotices runs a connection's MsgLockNotices stream: it sends the
// notices of the held locks that went away, as they come.
func (l *lockService) serveNotices(ctx context.Context, c *clientConn, str *quic.Stream, _ *session.Request) error {
	l.mu.Lock()
	cl := l.connState(c)
	if cl.streaming {
		l.mu.Unlock()
		return fmt.Errorf("%w: this connection's lock notices stream is already open", session.ErrBusy)
	}
	cl.streaming = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		cl.streaming = false
		l.mu.Unlock()
	}()
	if err := session.WriteResponse(str, &session.Response{}); err != nil {
		return nil
	}
	for {
		l.mu.Lock()
		batch := cl.pending
		cl.pending = nil
		l.mu.Unlock()
		for i := range batch {
			if err := session.WriteResponse(str, &batch[i]); err != nil {
				l.mu.Lock()
				cl.pending = append(batch[i:], cl.pending...) // for the next stream
				l.mu.Unlock()
				return nil
			}
		}
		select {
		case <-cl.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// Reasons a request went away, as the ErrNotHeld frame tells them.
const (
	goneDeleted  = "its node was deleted"
	goneReleased = "released"
	goneLost     = "lost (session expired, hold TTL passed or node deleted)"
)

// registerLocks installs the lock handlers and the lock observer; the
// caller (register) runs before Start.
func (f *front) registerLocks() {
	l := &lockService{f: f, waiters: map[string]map[*lockWaiter]struct{}{}, wake: make(chan struct{}, 1),
		held: map[string]*connLocks{}, conns: map[*clientConn]*connLocks{}}
	f.locks = l
	f.handleStream(session.MsgLock, l.serveLock)
	f.handleStream(session.MsgLockNotices, l.serveNotices)
	f.handleUnary(session.MsgLockCall, l.call)
	f.handleUnary(session.MsgLockRelease, l.release)
	f.handleUnary(session.MsgLockRenew, l.renew)
	f.handleUnary(session.MsgCheckSequencer, l.checkSequencer)
	f.handleUnary(session.MsgLockQueue, l.queue)
	// openFront installs f.observers after register.
	f.observers = append(f.observers, l)
}

// Applied wakes the waiters of the requests a batch granted or removed,
// and the tick loop when a batch may have brought NextTimer forward (a
// grant with a hold TTL, a lock lost into lock-delay, grants left over, a
// session ended with nodes left to delete).
// It runs on the FSM goroutine and never blocks.
func (l *lockService) Applied(results []*namespace.Result) {
	wake := false
	l.mu.Lock()
	watching := len(l.waiters) > 0
	following := len(l.held) > 0
	var deleted []string // followed nodes deleted by the result at hand
	for _, r := range results {
		deleted = deleted[:0]
		if len(r.Grants) > 0 {
			wake = true
			if watching {
				for _, g := range r.Grants {
					for w := range l.waiters[g.Node] {
						w.setGranted(g.Token)
					}
				}
			}
		}
		for i := range r.Events {
			ev := &r.Events[i]
			var why string
			switch ev.Type {
			case namespace.EventLockLost:
				wake, why = true, goneLost
			case namespace.EventLockReleased:
				why = goneReleased
			case namespace.EventDeleted:
				why = goneDeleted
			case namespace.EventSessionClosed, namespace.EventSessionExpired:
				// Its nodes beyond the first chunk go in ticks.
				wake = true
				continue
			default:
				continue
			}
			if watching {
				for w := range l.waiters[ev.Path] {
					w.setGone(why)
				}
			}
			switch {
			case !following:
			case why == goneDeleted:
				// A deleted request node gets its precise reason later
				// in the same command's events, when it has one.
				if _, ok := l.held[ev.Path]; ok {
					deleted = append(deleted, ev.Path)
				}
			default:
				l.gone(ev.Path, why)
			}
		}
		for _, node := range deleted {
			if _, ok := l.held[node]; ok {
				l.gone(node, goneDeleted)
			}
		}
	}
	l.mu.Unlock()
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *lockService) register(node string) *lockWaiter {
	w := &lockWaiter{node: node, notify: make(chan struct{}, 1)}
	l.mu.Lock()
	set := l.waiters[node]
	if set == nil {
		set = map[*lockWaiter]struct{}{}
		l.waiters[node] = set
	}
	set[w] = struct{}{}
	l.mu.Unlock()
	return w
}

func (l *lockService) unregister(w *lockWaiter) {
	l.mu.Lock()
	if set := l.waiters[w.node]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(l.waiters, w.node)
		}
	}
	l.mu.Unlock()
}

// waiterCount is the number of lock streams registered (tests).
func (l *lockService) waiterCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, set := range l.waiters {
		n += len(set)
	}
	return n
}

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

// runTimers proposes the namespace's lock ticks while this member is the
// ready leader, until stop.
func (l *lockService) runTimers(stop <-chan struct{}) {
	sub, cancel := l.f.s.SubscribeLeadership()
	defer cancel()
	leader := false
	for {
		if !leader {
			select {
			case <-stop:
				return
			case leader = <-sub:
			}
			continue
		}
		leader = l.tickWhileLeader(stop, sub)
	}
}

// tickWhileLeader proposes a tick whenever NextTimer is due. It returns
// whether this member leads again (a new term) when it stops.
func (l *lockService) tickWhileLeader(stop <-chan struct{}, sub <-chan bool) bool {
	s := l.f.s
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	burst := 0
	for {
		next, ok := s.store.NextTimer()
		now := s.clock.now()
		wait := s.cfg.ExpiryTick
		if ok && next <= now && burst < tickBurst {
			burst++
			err := l.tick()
			if err == nil {
				continue
			}
			var nl *NotLeaderError
			if errors.As(err, &nl) || errors.Is(err, ErrClosed) {
				return s.IsLeader()
			}
			s.log.Warn("lock tick not committed; retrying", "err", err)
		} else {
			if burst >= tickBurst {
				s.log.Warn("lock ticks keep coming due; pausing", "ticks", burst)
			}
			burst = 0
			if ok {
				// A Clock that is not the wall clock (tests) is re-read at
				// least every ExpiryTick.
				wait = min(max(time.Duration(next-now), 0), wait)
			}
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return false
		case leader := <-sub:
			return leader
		case <-l.wake:
		case <-timer.C:
		}
	}
}

// tick commits one OpNoop stamped with this leader's clock: it fires the
// lock timers due by then and grants what they free.
func (l *lockService) tick() error {
	ctx, cancel := context.WithTimeout(l.f.s.ctx, l.f.s.cfg.ApplyTimeout)
	defer cancel()
	res, err := l.f.s.Propose(ctx, &namespace.Command{Op: namespace.OpNoop})
	if err != nil {
		return err
	}
	return res.Err
}
