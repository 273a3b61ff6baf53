package quicfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// muxWriteTimeout bounds how long an answer on a mux stream waits for its
// client to take it: a client that stops reading its mux stream loses the
// connection instead of holding answers and handler goroutines.
const muxWriteTimeout = 30 * time.Second

// versionCloseGrace is how long the server waits, after answering a Hello
// it refuses, for the client to read the answer and close before it closes
// the connection itself.
const versionCloseGrace = time.Second

// Conn is one client connection and what it owns: the sessions it
// opened or resumed (only those may be named by its requests) and its
// watches. An HTTP API request is served as a Conn too (NewConn).
type Conn struct {
	f        *Front
	conn     *session.Conn // nil for an HTTP API request's Conn
	identity string        // TLS identity of the client certificate, "" without one
	host     string        // the client's IP address: the quota key of identity ""
	sem      chan struct{} // one slot per request in flight
	idle     *time.Timer   // see idleTimer

	mu       sync.Mutex
	attached map[uint64]struct{}
	watches  int

	watchBytes watch.Budget // guarded by the watch hub's lock
	resumes    connResumes  // guarded by the resume limiter's lock
	endMux     func()       // ends the connection's mux stream, if one is served
}

// NewConn is a Conn of no QUIC connection for a request of another front
// (the HTTP API) made with identity: the sessions it names are attached
// with Attach, and it is served through Call.
func (f *Front) NewConn(identity string) *Conn {
	return &Conn{f: f, identity: identity, attached: map[uint64]struct{}{}}
}

// Identity is the TLS identity of the client's certificate, "" without
// one (locksvc.Conn).
func (c *Conn) Identity() string { return c.identity }

// Host is the client's IP address: the quota key of identity "".
func (c *Conn) Host() string { return c.host }

// Context is the QUIC connection's: it ends when the connection does
// (a NewConn has none: not for another front's requests).
func (c *Conn) Context() context.Context { return c.conn.Context() }

// MaxFrameSize is the largest frame the client may send on the QUIC
// connection (not for a NewConn).
func (c *Conn) MaxFrameSize() int { return c.conn.MaxFrameSize() }

// WatchBytes is the connection's budget of watch event bytes (package
// watch guards it).
func (c *Conn) WatchBytes() *watch.Budget { return &c.watchBytes }

// logger is the member's logger naming the client. Built when something
// is logged, not per connection: most connections log nothing, and a
// logger with an attribute costs a handler of its own.
func (c *Conn) logger() *slog.Logger {
	if c.conn == nil { // an HTTP API request's view (NewConn)
		return c.f.log
	}
	return c.f.log.With("client", c.conn.RemoteAddr().String())
}

// debug logs at debug level, building the client's logger only when that
// level is on: "client connected" is logged for every connection.
func (c *Conn) debug(msg string, args ...any) {
	if c.f.log.Enabled(context.Background(), slog.LevelDebug) {
		c.logger().Debug(msg, args...)
	}
}

// Attach makes session id one this connection may name: it opened or
// resumed it.
func (c *Conn) Attach(id uint64) {
	c.mu.Lock()
	c.attached[id] = struct{}{}
	c.mu.Unlock()
}

// Detach forgets session id: it was closed.
func (c *Conn) Detach(id uint64) {
	c.mu.Lock()
	delete(c.attached, id)
	c.mu.Unlock()
}

// owns reports whether this connection opened or resumed session id.
func (c *Conn) owns(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.attached[id]
	return ok
}

// CheckSession fails unless id (when set) is attached to this connection:
// a session id alone, without having resumed it with its secret, grants
// nothing.
func (c *Conn) CheckSession(id uint64) error {
	if id != 0 && !c.owns(id) {
		return fmt.Errorf("%w: session %d is not attached to this connection (resume it first)", session.ErrUnknownSession, id)
	}
	return nil
}

// AddWatch counts a watch against the connection's limit.
func (c *Conn) AddWatch(limit int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watches >= limit {
		return fmt.Errorf("%w: %d watches on this connection", session.ErrTooManyWatches, limit)
	}
	c.watches++
	return nil
}

// RemoveWatch gives back the slot of a watch that ended.
func (c *Conn) RemoveWatch() {
	c.mu.Lock()
	c.watches--
	c.mu.Unlock()
}

// AllowResume refuses a session resume before it is looked at, when the
// connection has failed too many already (resumelimit.go).
func (c *Conn) AllowResume() error { return c.f.resumes.allow(c) }

// ResumeFailed records a failed resume of session id (a wrong secret or
// identity) and returns the error to answer: ErrBadSecret, naming the
// limit when the limiter refused it.
func (c *Conn) ResumeFailed(id uint64) error { return c.f.resumes.failed(c, id) }

// serve runs the connection: Hello first, then every stream in its own
// goroutine, at most MaxRequestsPerConn at once. It returns when the
// connection ends, after every stream goroutine has.
func (c *Conn) serve() {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.conn.CloseWithError(session.ConnClosed, "")
	// Echo liveness pings from the start: a client pings while its Hello
	// waits too.
	wg.Go(func() { c.conn.EchoPings(&c.f.pingsEchoed) })
	if !c.hello() {
		return
	}
	c.idle = c.idleTimer()
	defer c.idle.Stop()
	for {
		str, err := c.conn.AcceptStream(c.conn.Context())
		if err != nil {
			return
		}
		c.idle.Reset(c.f.cfg.IdleConnTimeout)
		if refused := c.take(); refused != nil {
			// Refused at once instead of queued: a client that floods one
			// connection slows only itself.
			str.SetWriteDeadline(time.Now().Add(time.Second))
			session.Reject(str, refused)
			session.EndStream(str)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			free := func() { once.Do(c.give) }
			defer free()
			c.serveStream(str, free)
		}()
	}
}

// take claims a request slot: one of the connection's
// (MaxRequestsPerConn) and one of the member's (MaxStreams). When either
// is full it fails with ErrBusy naming the cap: requests are refused at
// once, never queued. give returns the slot.
func (c *Conn) take() error {
	select {
	case c.sem <- struct{}{}:
	default:
		return fmt.Errorf("%w: %d requests in flight on this connection (--max-requests-per-conn)", session.ErrBusy, cap(c.sem))
	}
	select {
	case c.f.streams <- struct{}{}:
		return nil
	default:
		<-c.sem
		c.f.refusedStreams.Add(1)
		return fmt.Errorf("%w: %d requests in flight on this member (--max-streams)", session.ErrBusy, cap(c.f.streams))
	}
}

func (c *Conn) give() { <-c.sem; <-c.f.streams }

// idleTimer closes the connection once it has had no session and no
// request in flight for IdleConnTimeout; serve resets it on every stream,
// serveMux on every call.
func (c *Conn) idleTimer() *time.Timer {
	timeout := c.f.cfg.IdleConnTimeout
	var t *time.Timer
	t = time.AfterFunc(timeout, func() {
		c.mu.Lock()
		busy := len(c.attached) > 0
		c.mu.Unlock()
		if busy || len(c.sem) > 0 {
			t.Reset(timeout)
			return
		}
		c.conn.CloseWithError(session.ConnClosed, fmt.Sprintf("latch: idle connection closed: no session and no request for %v (--idle-conn-timeout)", timeout))
	})
	return t
}

// hello handles the first stream, which must carry Hello. On a refusal it
// answers, gives the client a moment to read the answer, and reports false
// (the caller closes the connection).
func (c *Conn) hello() bool {
	ctx, cancel := context.WithTimeout(c.conn.Context(), c.f.cfg.Transport.HandshakeTimeout+c.f.cfg.RequestReadTimeout)
	defer cancel()
	str, err := c.conn.AcceptStream(ctx)
	if err != nil {
		return false
	}
	defer session.EndStream(str)
	str.SetReadDeadline(time.Now().Add(c.f.cfg.RequestReadTimeout))
	req, err := session.ReadRequest(str, c.conn.MaxFrameSize())
	if err != nil {
		if !errors.Is(err, io.EOF) {
			session.Reject(str, requestError(err, c.f.cfg.RequestReadTimeout))
		}
		c.conn.CloseWithError(session.ConnProtocol, "no Hello")
		return false
	}
	if err := session.CheckHello(req); err != nil {
		c.logger().Info("refused client", "err", err, "client_name", req.ClientName)
		_ = session.Reply(str, session.ErrorResponse(err))
		select {
		case <-c.conn.Context().Done():
		case <-time.After(versionCloseGrace):
		}
		c.conn.CloseWithError(session.ConnVersion, err.Error())
		return false
	}
	c.debug("client connected", "client_name", req.ClientName, "identity", c.identity)
	return session.Reply(str, c.helloResponse()) == nil
}

func (c *Conn) helloResponse() *session.Response {
	return &session.Response{
		ProtocolVersion: session.ProtocolVersion,
		ServerID:        c.f.cfg.ID,
		Features:        c.f.Features(),
	}
}

// Features are the optional protocol features the member serves.
func (f *Front) Features() session.Feature {
	ft := session.FeatureKeepAliveBatch
	if !f.cfg.Transport.DisableMux {
		// The lock call is worth it only on the mux stream; a member
		// without the mux stands for one built before both.
		ft |= session.FeatureMux | session.FeatureLockCall
	}
	return ft | session.FeatureCache | session.FeatureLockNext
}

// requestError gives a request that could not be read its wire error.
func requestError(err error, readTimeout time.Duration) error {
	switch {
	case errors.Is(err, session.ErrFrameTooLarge), errors.Is(err, session.ErrMalformed):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %v", session.ErrMalformed, err)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Errorf("%w: no complete request within %v", session.ErrTimeout, readTimeout)
	}
	return fmt.Errorf("%w: reading request: %v", session.ErrMalformed, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serveStream reads one request, dispatches it and answers. A panic in a
// handler is logged and answered with ErrInternal: no client input may take
// the member down.
//
// free gives the stream's request slot back early: the lock notices
// stream and the mux stream (one each per connection) live as long as the
// connection and are no request in flight (the mux's calls take slots of
// their own).
func (c *Conn) serveStream(str *quic.Stream, free func()) {
	defer session.EndStream(str)
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("request handler panicked", "panic", r, "stack", string(debug.Stack()))
			session.Reject(str, fmt.Errorf("%w: the request failed on the server", session.ErrInternal))
		}
	}()
	str.SetReadDeadline(time.Now().Add(c.f.cfg.RequestReadTimeout))
	req, err := session.ReadRequest(str, c.conn.MaxFrameSize())
	if err != nil {
		if !errors.Is(err, io.EOF) { // io.EOF: the client sent nothing at all
			c.debug("bad request", "err", err)
			session.Reject(str, requestError(err, c.f.cfg.RequestReadTimeout))
		}
		return
	}
	if req.Type == session.MsgLockNotices || req.Type == session.MsgMux || req.Type == session.MsgCache {
		free()
	}
	ctx, cancel := context.WithCancel(str.Context())
	defer cancel()
	stop := context.AfterFunc(c.f.ctx, cancel)
	defer stop()
	if req.Type == session.MsgMux {
		if c.f.cfg.Transport.DisableMux { // as a member built before it
			session.Reject(str, fmt.Errorf("%w: this member does not serve the mux stream", session.ErrUnknownType))
			return
		}
		c.serveMux(ctx, str)
		return
	}
	c.f.dispatch(ctx, c, str, req)
}

// serveMux serves the connection's mux stream: every call runs
// concurrently through answer, the path of a unary request on a stream of
// its own, taking a request slot the same way (over a cap it is answered
// ErrBusy at once); a keepalive is answered on the reading goroutine. A newer mux stream of the connection replaces this
// one. A client that breaks the protocol, or does not take its answers,
// loses the connection. Returns when the stream ends, after its calls.
func (c *Conn) serveMux(ctx context.Context, str *quic.Stream) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	end := func() {
		cancel()
		str.CancelRead(session.StreamCanceled)
	}
	c.mu.Lock()
	old := c.endMux
	c.endMux = end
	c.mu.Unlock()
	if old != nil {
		old()
	}
	str.SetReadDeadline(time.Time{}) // between calls a mux stream may idle
	m := session.NewMuxServer(ctx, str, c.conn.MaxFrameSize(), muxWriteTimeout)
	reply := func(call *session.MuxCall, resp *session.Response) {
		err := m.Reply(call, resp)
		var se *quic.StreamError
		switch {
		case err == nil:
		case errors.As(err, &se):
			end() // the client reset the stream: it is over, not the connection
		default:
			c.debug("mux stream write failed", "err", err)
			c.conn.CloseWithError(session.ConnProtocol, "latch: the client does not read its mux stream")
		}
	}
	for {
		call, err := m.Next()
		if err != nil {
			if errors.Is(err, session.ErrMalformed) || errors.Is(err, session.ErrFrameTooLarge) {
				c.debug("bad mux stream", "err", err)
				c.conn.CloseWithError(session.ConnProtocol, err.Error())
			}
			return
		}
		c.idle.Reset(c.f.cfg.IdleConnTimeout)
		if _, ok := c.f.strm[call.Req.Type]; ok {
			reply(call, session.ErrorResponse(fmt.Errorf("%w: %v is a streaming request: send it on a stream of its own, not on the mux stream", session.ErrMalformed, call.Req.Type)))
			continue
		}
		if refused := c.take(); refused != nil {
			reply(call, session.ErrorResponse(refused))
			continue
		}
		if call.Req.Type == session.MsgKeepAlive {
			// Renewing leases in memory never waits: answered here, a
			// keepalive costs no worker's wake-up (most of what thousands
			// of idle sessions ask is this).
			c.runCall(call, reply)
			continue
		}
		wg.Add(1)
		c.f.workers.run(func() {
			defer wg.Done()
			c.runCall(call, reply)
		})
	}
}

// runCall answers one call of the mux stream through reply and gives its
// request slot back. A handler panic is logged and answered with
// ErrInternal.
func (c *Conn) runCall(call *session.MuxCall, reply func(*session.MuxCall, *session.Response)) {
	defer c.give()
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("request handler panicked", "panic", r, "stack", string(debug.Stack()))
			reply(call, session.ErrorResponse(fmt.Errorf("%w: the request failed on the server", session.ErrInternal)))
		}
	}()
	reply(call, c.f.answer(call.Ctx, c, call.Req))
}
