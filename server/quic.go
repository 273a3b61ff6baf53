package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/lease"
	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// front is a member's client side: the QUIC listener, one goroutine per
// connection and per request stream, workers for the calls on mux streams
// (workers.go), the request handlers, the watch hub
// and the leader's lease keeper. Decisions DESIGN.md leaves open:
//
//   - The client listener binds in New (port 0 resolves, ClientAddr then
//     names the bound port) and accepts from Start. Close first closes every
//     connection with ConnShutdown, so clients move on at once.
//   - TLS: TLSCert/TLSKey, else the member certificate, else (Dev) the
//     server certificate of the PKI in <DataDir>/tls; Dev verifies a client
//     certificate signed by its CA when one is offered (the dev client is
//     then named by it), without requiring one. TLSClientCA requires one
//     (mutual TLS). The identity is
//     recorded on the sessions a client opens and must match on resume.
//   - Connection: Hello first (else ErrVersion, then ConnVersion; garbage
//     first: ConnProtocol), within HandshakeTimeout plus 10s. Then every
//     stream is served in its own goroutine, at most MaxRequestsPerConn at
//     once; more are refused at once with ErrBusy. A request frame must
//     arrive within 10s of its stream opening. A handler panic is logged
//     and answered with ErrInternal.
//   - Mux stream (Hello offers FeatureMux and FeatureLockCall unless
//     Transport.DisableMux): one per connection, a newer one replaces
//     it; a new lock request rides it as MsgLockCall; it holds no request
//     slot, its calls do (the same caps, ErrBusy with the call's id). Each
//     call runs on a worker (a reused goroutine) through answer, like a
//     unary request on its own stream (a keepalive, which never waits, on
//     the goroutine that read it); streaming types are refused
//     (ErrMalformed). An
//     answer not taken within 30s, or bad input (unreadable frame, no call
//     id, an id not above the last one, frame above session.MuxMaxFrame), closes the
//     connection with ConnProtocol.
//   - Sessions: leader only (followers answer ErrNotLeader with the
//     leader's client address, ErrNoLeader when none is known or the new
//     leader has not loaded its sessions yet). TTLs are clamped into the
//     cluster settings [min_session_ttl_ms, max_session_ttl_ms] (1 s and
//     600 s unless set otherwise); 0 asks for 10s (clamped); negative
//     is ErrBadCommand. Secrets are 16 random bytes, compared in constant
//     time. Resume renews the lease. A request naming a session must come
//     on a connection that opened or resumed it (ErrUnknownSession). A
//     session that is gone answers ErrSessionExpired. Caps (caps.go):
//     MaxSessions in all, MaxSessionsPerIdentity per TLS identity, and
//     MaxAnonymousSessions for the identity "" that clients without a
//     certificate share, counting open and opening sessions; watches per
//     identity across connections.
//   - Leases (package lease): the ready leader loads every session with a full
//     TTL, then reaps due sessions in batches of ExpiryBatch, sleeping
//     until the next deadline but at most ExpiryTick (so an injected clock
//     is noticed). A failed expiry is requeued. Opens are leased from the
//     applied events too, so a session whose client left before the answer
//     still expires.
//   - Node reads answer with Rev = the exact applied index of the state
//     read (dispatch.go, stableRead), so watching from it misses nothing
//     and a client's MinRev bounds Stale reads on any member
//     (staleread.go). Leader reads of a node wait out its client-cache
//     invalidations in flight (cache.go).
//     Recursive delete is refused (the client deletes node by node).
//     Sessions lists at most 10000 sessions (More when cut).
//   - Watches (watch_stream.go; the hub is package watch) are served by
//     any member from its own applied log. Kind 0 means WatchData; a data watch also reports creation.
//     Only node events (created, deleted, data and children changed) are
//     delivered. The acknowledgement's Rev is FromRev when given, else the
//     current revision. A snapshot install on the member makes every watch
//     resync (its history is gone).
type front struct {
	s   *Server
	log *slog.Logger

	ln    *session.Listener
	hub   *watch.Hub
	keep  *lease.Keeper
	unary map[session.MsgType]unaryHandler
	strm  map[session.MsgType]streamHandler
	// observers are further observers of applied batches (observe).
	observers []ApplyObserver
	cache     *cacheTable  // cache.go
	reads     readCounts   // staleread.go
	workers   *callWorkers // run the mux streams' calls (workers.go)
	adm       *admission   // admission.go: who may start a handshake

	locks *locksvc.Service // the lock service (lock_member.go wires it)

	mu     sync.Mutex
	conns  map[*clientConn]struct{}
	closed bool

	// Global caps (MaxConns, MaxStreams): what is held, and refusals.
	streams        chan struct{} // one slot per request stream in flight, all connections
	refusedConns   atomic.Uint64
	refusedStreams atomic.Uint64
	pingsEchoed    atomic.Uint64    // liveness pings answered (session.(*Conn).EchoPings)
	handshakes     [2]atomic.Uint64 // connections accepted: [0] full TLS handshake, [1] resumed
	watchesBy      watchCounts      // caps.go
	capRefusals    capRefusals
	resumes        *resumeLimiter // resumelimit.go
}

// A unaryHandler answers one request with one response. When it returns
// an error, the error is what the client gets; a response returned with it
// keeps its other fields (a failed Multi carries its per-op results).
type unaryHandler func(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error)

// A streamHandler owns the stream once the request is read: it writes
// frames with session.WriteResponse and ends with session.Reply. An error
// it returns is sent as a final error frame. It must return when ctx ends
// (the client cancelled, the connection or the server closed).
type streamHandler func(ctx context.Context, c *clientConn, str *quic.Stream, req *session.Request) error

// openFront makes the TLS config and binds the client listener, so that
// ClientAddr is known (port 0 resolved) before Start, like the raft and
// admin listeners. Connections are accepted from Start on.
func (s *Server) openFront() error {
	tlsConf, err := s.clientTLS()
	if err != nil {
		return err
	}
	s.ticketKey = newTicketKey()
	adm := newAdmission(s.cfg.Admission, time.Now)
	ln, err := session.Listen(s.cfg.ClientAddr, tlsConf, s.cfg.Transport, adm)
	if err != nil {
		return err
	}
	if host, port, _ := net.SplitHostPort(s.cfg.ClientAddr); port == "0" {
		_, bound, _ := net.SplitHostPort(ln.Addr().String())
		s.cfg.ClientAddr = net.JoinHostPort(host, bound)
	}
	ln.SetTicketKeys([][32]byte{s.ticketKey})
	f := &front{s: s, log: s.log, ln: ln, adm: adm, conns: map[*clientConn]struct{}{}, streams: make(chan struct{}, s.cfg.MaxStreams)}
	f.hub = watch.NewHub(watch.Config{History: s.cfg.WatchHistory, Buffer: s.cfg.WatchBuffer,
		MaxBacklogBytes: s.cfg.MaxWatchBacklogBytes, MaxBytesPerConn: s.cfg.MaxWatchBytesPerConn}, s.fsm)
	f.keep = newLeaseKeeper(f)
	f.resumes = newResumeLimiter(s.cfg.MaxFailedResumesPerHost, s.cfg.Monotonic)
	f.workers = newCallWorkers(s)
	f.register()
	s.front = f
	s.fsm.SetObserver(s.applyObservers(s.cfg.Observer))
	return nil
}

// clientTLS returns the listener's TLS config. Dev without a certificate
// uses a development PKI in <DataDir>/tls and verifies a client
// certificate signed by its CA when one is presented, so dev sessions
// carry the dev client's identity without requiring it.
func (s *Server) clientTLS() (*tls.Config, error) {
	cert, key, ca := s.cfg.TLSCert, s.cfg.TLSKey, s.cfg.TLSClientCA
	optional := false
	if cert == "" && s.cfg.MemberCert != "" {
		cert, key = s.cfg.MemberCert, s.cfg.MemberKey
	}
	if cert == "" && s.cfg.Dev {
		dc, err := session.EnsureDevCerts(filepath.Join(s.cfg.DataDir, devTLSDir))
		if err != nil {
			return nil, err
		}
		cert, key = dc.ServerCert, dc.ServerKey
		if ca == "" {
			ca, optional = dc.CA, true
		}
	}
	c, err := session.ServerTLS(cert, key, ca)
	if err != nil {
		return nil, err
	}
	if optional {
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c, nil
}

// startFront starts accepting clients and the lease keeper.
func (s *Server) startFront() {
	f := s.front
	s.goFunc(f.acceptLoop)
	s.goFunc(f.probeLoop)
	s.goFunc(func() { f.adm.watchLag(s.stop) })
	s.goFunc(s.shareTicketKeys)
	s.goFunc(f.leadershipMoved)
	s.goFunc(func() {
		s.followLeadership(s.stop, func(_ <-chan struct{}, sub <-chan bool) bool { return f.keep.Lead(s.ctx, sub) })
	})
	s.goFunc(func() { f.locks.RunTimers(s.stop) })
}

// dropClients closes every client connection with code (ConnShutdown,
// ConnNotLeader) and why: the clients reconnect, to the leader, and resume
// their sessions.
func (f *front) dropClients(code quic.ApplicationErrorCode, why string) {
	f.mu.Lock()
	conns := make([]*clientConn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	for _, c := range conns {
		c.conn.CloseWithError(code, why)
	}
}

// closeFront tells every client the member is going away and stops
// accepting; the connection goroutines end with their connections and are
// waited for by Close. Safe to call more than once, and before Start.
func (s *Server) closeFront() {
	f := s.front
	if f == nil {
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	f.dropClients(session.ConnShutdown, "member shutting down")
	if err := f.ln.Close(); err != nil {
		f.log.Warn("close client listener", "err", err)
	}
}

func (f *front) acceptLoop() {
	for {
		conn, err := f.ln.Accept(f.s.ctx)
		if err != nil {
			return // listener closed or server stopping
		}
		c := &clientConn{
			f:        f,
			conn:     conn,
			identity: conn.Identity(),
			host:     remoteHost(conn.RemoteAddr()),
			sem:      make(chan struct{}, f.s.cfg.MaxRequestsPerConn),
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
		if len(f.conns) >= f.s.cfg.MaxConns {
			f.mu.Unlock()
			f.refusedConns.Add(1)
			c.logger().Warn("refused client connection", "cap", "--max-conns", "max", f.s.cfg.MaxConns)
			conn.CloseWithError(session.ConnBusy, fmt.Sprintf("latch: server busy: %d client connections open (--max-conns); try another member or later", f.s.cfg.MaxConns))
			continue
		}
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.s.goFunc(func() {
			defer func() {
				f.locks.ConnClosed(c)
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
			}()
			c.serve()
		})
	}
}

// dispatch routes req to its handler and writes the answer.
func (f *front) dispatch(ctx context.Context, c *clientConn, str *quic.Stream, req *session.Request) {
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
		_ = session.Reply(str, session.ErrorResponse(wireError(err)))
	}
	f.s.metrics.ops.request(req.Type, time.Time{}, err, false)
}

// admit checks a QUIC request before its handler runs: its type is known,
// the session it names is attached to c, its path is in this member's
// cell (a refusal for the cell is counted).
func (f *front) admit(c *clientConn, req *session.Request) error {
	if !req.Type.Valid() {
		return fmt.Errorf("%w: %d", session.ErrUnknownType, uint8(req.Type))
	}
	// Resume attaches its session; a batched KeepAlive answers per session.
	if req.Type != session.MsgResumeSession && !(req.Type == session.MsgKeepAlive && len(req.Sessions) > 0) {
		if err := c.checkSession(req.Session); err != nil {
			return err
		}
	}
	if err := f.checkCell(req); err != nil {
		f.s.metrics.ops.request(req.Type, time.Time{}, err, false)
		return err
	}
	return nil
}

// answer runs a unary QUIC request, on a stream of its own or on the mux
// stream, and returns its answer, errors included.
func (f *front) answer(ctx context.Context, c *clientConn, req *session.Request) *session.Response {
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

// call runs a unary request for c the way dispatch does: the path both
// fronts (QUIC, HTTP API) take. The error is the wire error.
func (f *front) call(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	if !req.Type.Valid() {
		return nil, fmt.Errorf("%w: %d", session.ErrUnknownType, uint8(req.Type))
	}
	if req.Type != session.MsgResumeSession && !(req.Type == session.MsgKeepAlive && len(req.Sessions) > 0) {
		if err := c.checkSession(req.Session); err != nil {
			return nil, err
		}
	}
	if err := f.checkCell(req); err != nil {
		return nil, err
	}
	return f.callUnary(ctx, c, req)
}

// callUnary runs the unary handler of req's type.
func (f *front) callUnary(ctx context.Context, c *clientConn, req *session.Request) (*session.Response, error) {
	h, ok := f.unary[req.Type]
	if !ok {
		return nil, fmt.Errorf("%w: %v is not served by this member", session.ErrUnknownType, req.Type)
	}
	start := time.Now()
	resp, err := h(ctx, c, req)
	f.s.metrics.ops.request(req.Type, start, err, true)
	if err != nil {
		return resp, wireError(err)
	}
	return resp, nil
}

// wireError turns the server's own errors into the protocol's: a
// redirect names the leader's client address, a stopping member says so
// with namespace.ErrClosed (the client tries another member).
func wireError(err error) error {
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		if nl.LeaderID == "" {
			return fmt.Errorf("%w: no leader is known yet", session.ErrNoLeader)
		}
		return session.NotLeader(nl.LeaderClientAddr)
	case errors.Is(err, ErrClosed), errors.Is(err, ErrNotStarted):
		return fmt.Errorf("%w: %v", namespace.ErrClosed, err)
	}
	return err
}
