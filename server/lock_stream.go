package server

// The MsgLock stream: the QUIC front's adapter to the lock service's
// acquisition engine (package locksvc, acquire.go). Progress goes out as frames on the stream, and a
// stream the client reset while its connection lives is a client that
// gave up (locksvc/doc.go has the whole design).

import (
	"context"
	"errors"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// clientReset reports whether the client reset str while its connection
// lives: it gave up on the request. A stream that ended with its
// connection is not a decision of the client.
func clientReset(c *quicfront.Conn, str *quic.Stream) bool {
	if c.Context().Err() != nil {
		return false
	}
	var se *quic.StreamError
	return errors.As(context.Cause(str.Context()), &se) && se.Remote
}

// streamCaller is a MsgLock stream as the engine's caller.
type streamCaller struct {
	ctx context.Context // the handler's: the stream's, ended with the member too
	c   *quicfront.Conn
	str *quic.Stream
	l   *locksvc.Service
}

// Queued writes a LockQueued frame: the first one, and another when the
// request becomes next in line (Next; the client then watches the leader
// closely).
func (k *streamCaller) Queued(node string, rev uint64, next bool) error {
	return session.WriteResponse(k.str, &session.Response{Lock: session.LockQueued, Node: node, Rev: rev, Next: next})
}

func (k *streamCaller) Follow(node string) { k.l.Follow(k.c, node) }

func (k *streamCaller) Granted(o locksvc.Outcome) error {
	if err := session.WriteResponse(k.str, &session.Response{Lock: session.LockGranted, Node: o.Node, Token: o.Token, Rev: o.Rev}); err != nil {
		return err
	}
	// The stream ends with the grant, its FIN in the grant's packet (the
	// client reads it): a held lock is no request in flight.
	_ = k.str.Close()
	return nil
}

func (k *streamCaller) Done() <-chan struct{} { return k.ctx.Done() }
func (k *streamCaller) GaveUp() bool          { return clientReset(k.c, k.str) }

// serveLock runs one MsgLock stream: request (or re-attach), wait, grant;
// the member then follows the held lock for c (locksvc/notices.go).
func (f *front) serveLock(ctx context.Context, c *quicfront.Conn, str *quic.Stream, req *session.Request) error {
	_, err := f.locks.Acquire(locksvc.Acquisition(c, req), &streamCaller{ctx: ctx, c: c, str: str, l: f.locks})
	return err
}
