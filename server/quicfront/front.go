package quicfront

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/session"
)

// Front is a member's QUIC client front: the listener, one goroutine per
// connection and per request stream, workers for the calls on mux streams
// (workers.go), the handler tables requests are routed by, admission
// control and the probe answers. The member gives it its handlers
// (HandleUnary, HandleStream) and its Parts.
type Front struct {
	cfg   Config
	parts Parts
	ctx   context.Context // the member's: ends when it stops
	log   *slog.Logger

	ln        *session.Listener
	ticketKey [32]byte // seals this member's TLS session tickets (ticketkeys.go)
	unary     map[session.MsgType]Unary
	strm      map[session.MsgType]Stream
	workers   *callWorkers   // run the mux streams' calls (workers.go)
	adm       *admission     // admission.go: who may start a handshake
	resumes   *resumeLimiter // resumelimit.go

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool

	// Global caps (MaxConns, MaxStreams): what is held, and refusals.
	streams        chan struct{} // one slot per request stream in flight, all connections
	refusedConns   atomic.Uint64
	refusedStreams atomic.Uint64
	pingsEchoed    atomic.Uint64    // liveness pings answered (session.(*Conn).EchoPings)
	handshakes     [2]atomic.Uint64 // connections accepted: [0] full TLS handshake, [1] resumed
}

// A Unary handler answers one request with one response. When it returns
// an error, the error is what the client gets; a response returned with it
// keeps its other fields (a failed Multi carries its per-op results).
type Unary func(ctx context.Context, c *Conn, req *session.Request) (*session.Response, error)

// A Stream handler owns the stream once the request is read: it writes
// frames with session.WriteResponse and ends with session.Reply. An error
// it returns is sent as a final error frame. It must return when ctx ends
// (the client cancelled, the connection or the member closed).
type Stream func(ctx context.Context, c *Conn, str *quic.Stream, req *session.Request) error

// New makes the front and binds its listener with tlsConf, so that Addr
// is known (port 0 resolved) before Start. ctx is the member's: when it
// ends, the front's goroutines end. Connections are accepted from Start
// on; the handlers are installed before it.
func New(ctx context.Context, cfg Config, tlsConf *tls.Config, parts Parts) (*Front, error) {
	adm := newAdmission(cfg.Admission, time.Now)
	ln, err := session.Listen(cfg.Addr, tlsConf, cfg.Transport, adm)
	if err != nil {
		return nil, err
	}
	f := &Front{
		cfg: cfg, parts: parts, ctx: ctx, log: cfg.Log,
		ln: ln, ticketKey: newTicketKey(), adm: adm,
		unary:   map[session.MsgType]Unary{},
		strm:    map[session.MsgType]Stream{},
		workers: newCallWorkers(ctx.Done(), parts.Go),
		resumes: newResumeLimiter(cfg.MaxFailedResumesPerHost, cfg.Monotonic),
		conns:   map[*Conn]struct{}{},
		streams: make(chan struct{}, cfg.MaxStreams),
	}
	ln.SetTicketKeys([][32]byte{f.ticketKey})
	f.HandleUnary(session.MsgHello, func(_ context.Context, c *Conn, _ *session.Request) (*session.Response, error) {
		return c.helloResponse(), nil // a repeated Hello is harmless
	})
	return f, nil
}

// Addr is the address the listener is bound to.
func (f *Front) Addr() net.Addr { return f.ln.Addr() }

// HandleUnary makes h the handler of requests of type t. Call before
// Start.
func (f *Front) HandleUnary(t session.MsgType, h Unary) {
	delete(f.strm, t)
	f.unary[t] = h
}

// HandleStream makes h the handler of streaming requests of type t. Call
// before Start.
func (f *Front) HandleStream(t session.MsgType, h Stream) {
	delete(f.unary, t)
	f.strm[t] = h
}

// Start accepts clients and answers probes, and runs admission control's
// lag watch, the ticket key sharing and the step-down watch, all on
// goroutines of Parts.Go until the member's context ends.
func (f *Front) Start() {
	f.parts.Go(f.acceptLoop)
	f.parts.Go(f.probeLoop)
	f.parts.Go(func() { f.adm.watchLag(f.ctx.Done()) })
	f.parts.Go(f.shareTicketKeys)
	f.parts.Go(f.leadershipMoved)
}

// DropClients closes every client connection with code (ConnShutdown,
// ConnNotLeader) and why: the clients reconnect, to the leader, and resume
// their sessions.
func (f *Front) DropClients(code quic.ApplicationErrorCode, why string) {
	f.mu.Lock()
	conns := make([]*Conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.conn.CloseWithError(code, why)
	}
}

// Close tells every client the member is going away and stops accepting;
// the connection goroutines end with their connections (Parts.Go's owner
// waits for them). Safe to call more than once, and before Start.
func (f *Front) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	f.DropClients(session.ConnShutdown, "member shutting down")
	if err := f.ln.Close(); err != nil {
		f.log.Warn("close client listener", "err", err)
	}
}

// Connections is the number of client connections open.
func (f *Front) Connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

func (f *Front) acceptLoop() {
	for {
		conn, err := f.ln.Accept(f.ctx)
		if err != nil {
			return // listener closed or member stopping
		}
		c := &Conn{
			f:        f,
			conn:     conn,
			identity: conn.Identity(),
			host:     remoteHost(conn.RemoteAddr()),
			sem:      make(chan struct{}, f.cfg.MaxRequestsPerConn),
			attached: map[uint64]struct{}{},
		}
		if conn.ConnectionState().TLS.DidResume {
			f.handshakes[1].Add(1)
		} else {
			f.handshakes[0].Add(1)
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			conn.CloseWithError(session.ConnShutdown, "member shutting down")
			continue
		}
		if len(f.conns) >= f.cfg.MaxConns {
			f.mu.Unlock()
			f.refusedConns.Add(1)
			c.logger().Warn("refused client connection", "cap", "--max-conns", "max", f.cfg.MaxConns)
			conn.CloseWithError(session.ConnBusy, fmt.Sprintf("latch: server busy: %d client connections open (--max-conns); try another member or later", f.cfg.MaxConns))
			continue
		}
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.parts.Go(func() {
			defer func() {
				if f.parts.Closed != nil {
					f.parts.Closed(c)
				}
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
			}()
			c.serve()
		})
	}
}

// dispatch routes req to its handler and writes the answer.
func (f *Front) dispatch(ctx context.Context, c *Conn, str *quic.Stream, req *session.Request) {
	h, ok := f.strm[req.Type]
	if !ok {
		_ = session.Reply(str, f.answer(ctx, c, req))
		return
	}
	if err := f.admit(c, req); err != nil {
		_ = session.Reply(str, session.ErrorResponse(err))
		return
	}
	err := h(ctx, c, str, req)
	if err != nil {
		_ = session.Reply(str, session.ErrorResponse(f.parts.Requests.WireError(err)))
	}
	f.parts.Requests.Served(req.Type, time.Time{}, err, false)
}

// admit checks a QUIC request before its handler runs: its type is known,
// the session it names is attached to c, the member serves it
// (Requests.Check; a refusal is counted).
func (f *Front) admit(c *Conn, req *session.Request) error {
	if err := c.checkRequest(req); err != nil {
		return err
	}
	if err := f.parts.Requests.Check(req); err != nil {
		f.parts.Requests.Served(req.Type, time.Time{}, err, false)
		return err
	}
	return nil
}

// checkRequest fails unless req's type is known and the session it names
// is attached to c.
func (c *Conn) checkRequest(req *session.Request) error {
	if !req.Type.Valid() {
		return fmt.Errorf("%w: %d", session.ErrUnknownType, uint8(req.Type))
	}
	// Resume attaches its session; a batched KeepAlive answers per session.
	if req.Type != session.MsgResumeSession && !(req.Type == session.MsgKeepAlive && len(req.Sessions) > 0) {
		return c.CheckSession(req.Session)
	}
	return nil
}

// answer runs a unary QUIC request, on a stream of its own or on the mux
// stream, and returns its answer, errors included.
func (f *Front) answer(ctx context.Context, c *Conn, req *session.Request) *session.Response {
	if err := f.admit(c, req); err != nil {
		return session.ErrorResponse(err)
	}
	resp, err := f.callUnary(ctx, c, req)
	if err != nil {
		if resp == nil {
			resp = &session.Response{}
		}
		resp.SetErr(err)
	}
	return resp
}

// Call runs a unary request for c the way a QUIC request is run: the path
// both fronts (QUIC, HTTP API) take. The error is the wire error.
func (f *Front) Call(ctx context.Context, c *Conn, req *session.Request) (*session.Response, error) {
	if err := c.checkRequest(req); err != nil {
		return nil, err
	}
	if err := f.parts.Requests.Check(req); err != nil {
		return nil, err
	}
	return f.callUnary(ctx, c, req)
}

// callUnary runs the unary handler of req's type.
func (f *Front) callUnary(ctx context.Context, c *Conn, req *session.Request) (*session.Response, error) {
	h, ok := f.unary[req.Type]
	if !ok {
		return nil, fmt.Errorf("%w: %v is not served by this member", session.ErrUnknownType, req.Type)
	}
	start := time.Now()
	resp, err := h(ctx, c, req)
	f.parts.Requests.Served(req.Type, start, err, true)
	if err != nil {
		return resp, f.parts.Requests.WireError(err)
	}
	return resp, nil
}
