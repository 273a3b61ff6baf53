package locksvc

// The held locks a member follows for the connections they were granted
// to, and the MsgLockNotices stream that tells a connection when one went
// away (doc.go has the whole design).

import (
	"context"
	"fmt"
	"io"

	"github.com/latch-io/latch/session"
)

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

// Follow makes c the connection told when node goes away (a re-attach
// from another connection moves it).
func (l *Service) Follow(c Conn, node string) {
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
func (l *Service) connState(c Conn) *connLocks {
	cl := l.conns[c]
	if cl == nil {
		cl = &connLocks{nodes: map[string]struct{}{}, releasing: map[string]int{}, wake: make(chan struct{}, 1)}
		l.conns[c] = cl
	}
	return cl
}

// ConnClosed forgets what c followed: its client re-attaches to its
// held locks on its next connection.
func (l *Service) ConnClosed(c Conn) {
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
func (l *Service) gone(node, why string) {
	cl := l.held[node]
	if cl == nil {
		return
	}
	delete(l.held, node)
	delete(cl.nodes, node)
	if why == GoneReleased && cl.releasing[node] > 0 {
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
func (l *Service) releaseBy(c Conn, node string) (done func()) {
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

// HeldCount is the number of held locks followed (metrics, tests).
func (l *Service) HeldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// ServeNotices runs a connection's MsgLockNotices stream: it sends the
// notices of the held locks that went away, as they come.
func (l *Service) ServeNotices(ctx context.Context, c Conn, str io.Writer) error {
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
	GoneDeleted  = "its node was deleted"
	GoneReleased = "released"
	GoneLost     = "lost (session expired, hold TTL passed or node deleted)"
)
