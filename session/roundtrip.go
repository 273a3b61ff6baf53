package session

// A request's way over a connection: the mux stream or a stream of its
// own, its one response or its stream of frames, and how a context's end
// resets the stream.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/quic-go/quic-go"
)

// send opens a stream, writes req and closes the write side. When ctx ends
// the stream is reset in both directions, which unblocks any read on it
// and tells the server to drop the request; the returned stop undoes that
// hook.
func send(ctx context.Context, conn *Conn, req *Request) (*quic.Stream, func() bool, error) {
	frame, err := appendFrame(nil, req)
	if err != nil {
		return nil, nil, err
	}
	if n := len(frame) - frameHeaderLen; n > conn.maxFrame {
		return nil, nil, fmt.Errorf("%w: request of %d bytes, max %d", ErrFrameTooLarge, n, conn.maxFrame)
	}
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, nil, ctxErr(ctx, err)
	}
	stop := context.AfterFunc(ctx, func() { abort(str, StreamCanceled) })
	// When the server stopped reading (it rejected the request, e.g. as
	// too large), Write or Close fail, but its response still says why:
	// the caller goes on to read it.
	if _, err := str.Write(frame); err != nil && !peerStopped(err) {
		stop()
		abort(str, StreamCanceled)
		return nil, nil, ctxErr(ctx, err)
	}
	_ = str.Close()
	return str, stop, nil
}

// peerStopped reports whether err is the peer cancelling its read side.
func peerStopped(err error) bool {
	var se *quic.StreamError
	return errors.As(err, &se) && se.Remote
}

// abort ends both directions of str at once.
func abort(str *quic.Stream, code quic.StreamErrorCode) {
	str.CancelRead(code)
	str.CancelWrite(code)
}

// ctxErr prefers the context's error: when ctx ended, whatever the stream
// reported is a consequence of that.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// RoundTrip sends req and reads its one response: on the connection's
// mux stream when the server serves it (see Hello) and req is unary and
// at most MuxMaxFrame bytes, else on a new stream of conn. A response
// carrying an error code is returned as is (see Response.Err); the error
// result is for transport failures: the context's error when ctx ended
// (the server is told to drop the request), ErrFrameTooLarge when req
// exceeds conn's frame limit, ErrMalformed, io.ErrUnexpectedEOF (wrapped),
// or the QUIC error (a *quic.StreamError when only the request's stream,
// or the mux stream with every call on it, failed).
func RoundTrip(ctx context.Context, conn *Conn, req *Request) (*Response, error) {
	defer conn.dog.begin()()
	if m := conn.mux.Load(); m != nil && !req.Type.Streaming() {
		if resp, err := m.roundTrip(ctx, req); err != errNotForMux {
			return resp, err
		}
	}
	str, stop, err := send(ctx, conn, req)
	if err != nil {
		return nil, err
	}
	defer stop()
	resp, err := ReadResponse(str, conn.maxFrame)
	if err == nil {
		conn.dog.heard()
	}
	if err != nil {
		abort(str, StreamMalformed)
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("latch: stream ended without a response: %w", io.ErrUnexpectedEOF)
		}
		return nil, ctxErr(ctx, err)
	}
	// The server closes its side right after the response (the FIN rides
	// with the last bytes): reading it retires the stream cleanly, and
	// anything else is a protocol error.
	if err := expectEnd(str); err != nil {
		abort(str, StreamMalformed)
		return nil, ctxErr(ctx, err)
	}
	return resp, nil
}

// StreamReader reads the frames of a streaming request (Watch, Lock).
// It is not safe for concurrent Next calls; Close may be called from any
// goroutine and more than once.
type StreamReader struct {
	ctx  context.Context
	str  *quic.Stream
	stop func() bool
	dog  *watchdog

	wmu     sync.Mutex
	waiting func() // ends the stream's count as a waiting call; nil while it does not count
	ended   bool
	max     int
	err     error // sticky: once set, Next returns it
}

// OpenStreaming sends req on a new stream of conn and returns a reader of
// its response frames. The stream lives until the server ends it, ctx
// ends, or Close. It counts as a call waiting on the member until it ends
// (Config.FailureTimeout): use it for a stream somebody blocks on (a lock
// wait, a barrier's watch).
func OpenStreaming(ctx context.Context, conn *Conn, req *Request) (*StreamReader, error) {
	return openStream(ctx, conn, req, true)
}

// OpenSubscription is OpenStreaming for a stream that may stay open for
// as long as the connection without anybody blocking on it (the lock
// notices stream, a watch): it does not count as a waiting call, so a
// client that only holds subscriptions is watched at the connection's
// idle pace (Config.KeepAlivePeriod, MaxIdleTimeout), not pinged every
// quarter of FailureTimeout. Thousands of watching clients would
// otherwise keep the member busy with pings.
func OpenSubscription(ctx context.Context, conn *Conn, req *Request) (*StreamReader, error) {
	return openStream(ctx, conn, req, false)
}

func openStream(ctx context.Context, conn *Conn, req *Request, waiting bool) (*StreamReader, error) {
	s := &StreamReader{ctx: ctx, dog: conn.dog, max: conn.maxFrame}
	if waiting {
		s.Waiting(true) // from before the send: opening the stream may wait too
	}
	str, stop, err := send(ctx, conn, req)
	if err != nil {
		s.done()
		return nil, err
	}
	s.str, s.stop = str, stop
	return s, nil
}

// Waiting sets whether the stream counts as a call waiting on the member
// (Config.FailureTimeout) from now on, until it ends: a lock waiter far
// back in its queue expects nothing from the member soon and waits like a
// subscription, and counts as waiting once it is next in line
// (FeatureLockNext). Safe from any goroutine.
func (s *StreamReader) Waiting(on bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case on && s.waiting == nil && !s.ended:
		s.waiting = s.dog.begin()
	case !on && s.waiting != nil:
		s.waiting()
		s.waiting = nil
	}
}

// done ends the stream's count as a waiting call for good.
func (s *StreamReader) done() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.ended = true
	if s.waiting != nil {
		s.waiting()
		s.waiting = nil
	}
}

// Next returns the next frame. A frame carrying an error code ends the
// stream and is returned as its error (errors.Is its sentinel). io.EOF
// means the server ended the stream normally; the context's error means
// ctx ended; ErrStreamClosed means Close was called.
func (s *StreamReader) Next() (*Response, error) {
	if s.err != nil {
		return nil, s.err
	}
	resp, err := ReadResponse(s.str, s.max)
	if err == nil {
		s.dog.heard()
	}
	switch {
	case err == nil && resp.Code != CodeOK:
		s.finish(resp.Err(), StreamDone)
	case err == nil:
		return resp, nil
	case errors.Is(err, io.EOF):
		// Both directions are finished (send closed ours, the server's
		// end was read): the stream retires as it is. Aborting it would
		// only send the server a STOP_SENDING and a RESET_STREAM.
		s.err = io.EOF
		s.stop()
		s.done()
	case s.ctx.Err() != nil:
		s.finish(s.ctx.Err(), StreamCanceled)
	case isLocalCancel(err):
		s.finish(ErrStreamClosed, StreamDone)
	default:
		s.finish(err, StreamMalformed)
	}
	return nil, s.err
}

func (s *StreamReader) finish(err error, code quic.StreamErrorCode) {
	s.err = err
	s.stop()
	s.done()
	abort(s.str, code)
}

// Close ends the stream; the server sees it cancelled and drops the work
// (a lock waiter withdraws its request, a watch is removed).
func (s *StreamReader) Close() error {
	s.stop()
	s.done()
	abort(s.str, StreamCanceled)
	return nil
}

// isLocalCancel reports whether err is our own CancelRead (Close).
func isLocalCancel(err error) bool {
	var se *quic.StreamError
	return errors.As(err, &se) && !se.Remote
}
