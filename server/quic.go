package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Client-front defaults (see the Config fields of the same names).
const (
	DefaultMaxSessionsPerIdentity = 10000
	DefaultExpiryBatch            = 256
	DefaultExpiryTick             = 500 * time.Millisecond
	DefaultWatchHistory           = 100000
	DefaultWatchBuffer            = 1024
	DefaultMaxWatchesPerConn      = 1024
	DefaultMaxRequestsPerConn     = 4096
	DefaultMaxConns               = 10000
	DefaultMaxStreams             = 16384
	DefaultMaxWatchBacklogBytes   = 64 << 20
	DefaultMaxWatchBytesPerConn   = 16 << 20
	DefaultIdleConnTimeout        = 2 * time.Minute
)

// watchWriteTimeout bounds how long a watch waits for its client to take
// one frame: a client that stops reading its watches gets them cut (the
// stream is reset) instead of holding their events and goroutines.
const watchWriteTimeout = 30 * time.Second

// muxWriteTimeout bounds how long an answer on a mux stream waits for its
// client to take it: a client that stops reading its mux stream loses the
// connection instead of holding answers and handler goroutines.
const muxWriteTimeout = 30 * time.Second

// DefaultRequestReadTimeout is Config.RequestReadTimeout's default.
const DefaultRequestReadTimeout = 10 * time.Second

// versionCloseGrace is how long the server waits, after answering a Hello
// it refuses, for the client to read the answer and close before it closes
// the connection itself.
const versionCloseGrace = time.Second

// devTLSDir is where Dev keeps its development PKI (CA, member and server
// certificates), under DataDir. The CLI looks for ./latch-data/tls/ca.pem
// next to `latchd --dev` and issues itself a client certificate there.
const devTLSDir = "tls"

// frontDefaults fills the client-front fields of cfg left zero.
func frontDefaults(cfg *Config) {
	setIfZero(&cfg.MaxSessionsPerIdentity, DefaultMaxSessionsPerIdentity)
	setIfZero(&cfg.MaxSessions, DefaultMaxSessions)
	setIfZero(&cfg.MaxAnonymousSessions, DefaultMaxAnonymousSessions)
	setIfZero(&cfg.MaxWatchesPerIdentity, DefaultMaxWatchesPerIdentity)
	setIfZero(&cfg.ExpiryBatch, DefaultExpiryBatch)
	setIfZero(&cfg.ExpiryTick, DefaultExpiryTick)
	setIfZero(&cfg.WatchHistory, DefaultWatchHistory)
	setIfZero(&cfg.WatchBuffer, DefaultWatchBuffer)
	setIfZero(&cfg.MaxWatchesPerConn, DefaultMaxWatchesPerConn)
	setIfZero(&cfg.MaxRequestsPerConn, DefaultMaxRequestsPerConn)
	setIfZero(&cfg.APIMaxRequests, DefaultAPIMaxRequests)
	setIfZero(&cfg.APIMaxWatches, DefaultAPIMaxWatches)
	setIfZero(&cfg.MaxConns, DefaultMaxConns)
	setIfZero(&cfg.MaxStreams, DefaultMaxStreams)
	setIfZero(&cfg.MaxWatchBacklogBytes, DefaultMaxWatchBacklogBytes)
	setIfZero(&cfg.MaxWatchBytesPerConn, DefaultMaxWatchBytesPerConn)
	setIfZero(&cfg.MaxFailedResumesPerHost, DefaultMaxFailedResumesPerHost)
	setIfZero(&cfg.IdleConnTimeout, DefaultIdleConnTimeout)
	setIfZero(&cfg.RequestReadTimeout, DefaultRequestReadTimeout)
	cfg.Admission.fillDefaults()
	setIfZero(&cfg.MaxReconnectGrace, DefaultMaxReconnectGrace)
	// Fill the transport's defaults here too, so the front reads real
	// values (the handshake timeout bounds the wait for Hello).
	def := session.DefaultConfig()
	setIfZero(&cfg.Transport.MaxFrameSize, def.MaxFrameSize)
	setIfZero(&cfg.Transport.MaxIncomingStreams, def.MaxIncomingStreams)
	setIfZero(&cfg.Transport.KeepAlivePeriod, def.KeepAlivePeriod)
	setIfZero(&cfg.Transport.MaxIdleTimeout, def.MaxIdleTimeout)
	setIfZero(&cfg.Transport.HandshakeTimeout, def.HandshakeTimeout)
}

// validateFront checks the client-front fields of c.
func (c *Config) validateFront() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	if err := c.Admission.Validate(); err != nil {
		return err
	}
	switch {
	case !c.Dev && c.TLSCert == "" && c.MemberCert == "":
		return bad("TLSCert", "required unless Dev or MemberCert (clients always speak TLS 1.3)")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return bad("TLSKey", "TLSCert and TLSKey go together")
	case c.TLSClientCA != "" && c.TLSCert == "" && c.MemberCert == "" && !c.Dev:
		return bad("TLSClientCA", "needs TLSCert and TLSKey")
	case c.MaxReconnectGrace < 0:
		return bad("MaxReconnectGrace", "%v is negative", c.MaxReconnectGrace)
	case c.MaxSessionsPerIdentity < 1:
		return bad("MaxSessionsPerIdentity", "%d must be at least 1", c.MaxSessionsPerIdentity)
	case c.MaxSessions < 1:
		return bad("MaxSessions", "%d must be at least 1", c.MaxSessions)
	case c.MaxAnonymousSessions < 1:
		return bad("MaxAnonymousSessions", "%d must be at least 1", c.MaxAnonymousSessions)
	case c.MaxWatchesPerIdentity < 1:
		return bad("MaxWatchesPerIdentity", "%d must be at least 1", c.MaxWatchesPerIdentity)
	case c.ExpiryBatch < 1:
		return bad("ExpiryBatch", "%d must be at least 1", c.ExpiryBatch)
	case c.ExpiryTick < time.Millisecond:
		return bad("ExpiryTick", "%v is below 1ms", c.ExpiryTick)
	case c.WatchHistory < 1:
		return bad("WatchHistory", "%d must be at least 1", c.WatchHistory)
	case c.WatchBuffer < 1:
		return bad("WatchBuffer", "%d must be at least 1", c.WatchBuffer)
	case c.MaxRequestsPerConn < 2:
		return bad("MaxRequestsPerConn", "%d must be at least 2", c.MaxRequestsPerConn)
	case c.MaxWatchesPerConn < 1 || c.MaxWatchesPerConn >= c.MaxRequestsPerConn:
		return bad("MaxWatchesPerConn", "%d must be in [1, MaxRequestsPerConn %d)", c.MaxWatchesPerConn, c.MaxRequestsPerConn)
	case c.MaxConns < 1:
		return bad("MaxConns", "%d must be at least 1", c.MaxConns)
	case c.MaxStreams < 1:
		return bad("MaxStreams", "%d must be at least 1", c.MaxStreams)
	case c.MaxWatchBacklogBytes < minWatchBytes:
		return bad("MaxWatchBacklogBytes", "%d must be at least %d (one frame of long paths)", c.MaxWatchBacklogBytes, minWatchBytes)
	case c.MaxFailedResumesPerHost < 1:
		return bad("MaxFailedResumesPerHost", "%d must be at least 1", c.MaxFailedResumesPerHost)
	case c.MaxWatchBytesPerConn < minWatchBytes:
		return bad("MaxWatchBytesPerConn", "%d must be at least %d (one frame of long paths)", c.MaxWatchBytesPerConn, minWatchBytes)
	case c.IdleConnTimeout < 0:
		return bad("IdleConnTimeout", "%v is negative", c.IdleConnTimeout)
	case c.RequestReadTimeout < 0:
		return bad("RequestReadTimeout", "%v is negative", c.RequestReadTimeout)
	}
	if err := c.Transport.Validate(); err != nil {
		return bad("Transport", "%v", err)
	}
	return nil
}

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
//     unary request on its own stream; streaming types are refused
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
//   - Leases (expiry.go): the ready leader loads every session with a full
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
//   - Watches (watch.go) are served by any member from its own applied
//     log. Kind 0 means WatchData; a data watch also reports creation.
//     Only node events (created, deleted, data and children changed) are
//     delivered. The acknowledgement's Rev is FromRev when given, else the
//     current revision. A snapshot install on the member makes every watch
//     resync (its history is gone).
type front struct {
	s   *Server
	log *slog.Logger

	ln    *session.Listener
	hub   *watchHub
	keep  *leaseKeeper
	unary map[session.MsgType]unaryHandler
	strm  map[session.MsgType]streamHandler
	// observers are further observers of applied batches (observe).
	observers []ApplyObserver
	locks     *lockService // lock.go
	cache     *cacheTable  // cache.go
	reads     readCounts   // staleread.go
	workers   *callWorkers // run the mux streams' calls (workers.go)
	adm       *admission   // admission.go: who may start a handshake

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
	f.hub = newWatchHub(s.cfg.WatchHistory, s.cfg.WatchBuffer, s.store.AppliedIndex, s.fsm.restores.Load)
	f.hub.maxBacklog, f.hub.maxConnBytes = s.cfg.MaxWatchBacklogBytes, s.cfg.MaxWatchBytesPerConn
	f.keep = newLeaseKeeper(s, monoTime(s.cfg.Monotonic).Now)
	f.resumes = newResumeLimiter(s.cfg.MaxFailedResumesPerHost, s.cfg.Monotonic)
	f.workers = newCallWorkers(s)
	f.register()
	s.front = f
	s.fsm.observer = s.applyObservers(s.cfg.Observer)
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
	s.goFunc(func() { f.keep.run(s.stop) })
	s.goFunc(func() { f.locks.runTimers(s.stop) })
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
		c.echo = conn.NewPingEchoer(&f.pingsEchoed, func() bool { return len(c.sem) > 0 })
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
				f.locks.connClosed(c)
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
			}()
			c.serve()
		})
	}
}

// clientConn is one client connection and what it owns: the sessions it
// opened or resumed (only those may be named by its requests) and its
// watches.
type clientConn struct {
	f        *front
	conn     *session.Conn
	identity string        // TLS identity of the client certificate, "" without one
	host     string        // the client's IP address: the quota key of identity ""
	sem      chan struct{} // one slot per request in flight
	idle     *time.Timer   // see idleTimer
	echo     *session.PingEchoer

	mu       sync.Mutex
	attached map[uint64]struct{}
	watches  int

	watchBytes watchBudget // guarded by the watch hub's lock
	resumes    connResumes // guarded by the resume limiter's lock
	endMux     func()      // ends the connection's mux stream, if one is served
}

// logger is the member's logger naming the client. Built when something
// is logged, not per connection: most connections log nothing, and a
// logger with an attribute costs a handler of its own.
func (c *clientConn) logger() *slog.Logger {
	if c.conn == nil { // an HTTP API request's view (api.go)
		return c.f.log
	}
	return c.f.log.With("client", c.conn.RemoteAddr().String())
}

// debug logs at debug level, building the client's logger only when that
// level is on: "client connected" is logged for every connection.
func (c *clientConn) debug(msg string, args ...any) {
	if c.f.log.Enabled(context.Background(), slog.LevelDebug) {
		c.logger().Debug(msg, args...)
	}
}

func (c *clientConn) attach(id uint64) {
	c.mu.Lock()
	c.attached[id] = struct{}{}
	c.mu.Unlock()
}

func (c *clientConn) detach(id uint64) {
	c.mu.Lock()
	delete(c.attached, id)
	c.mu.Unlock()
}

// owns reports whether this connection opened or resumed session id.
func (c *clientConn) owns(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.attached[id]
	return ok
}

// checkSession fails unless id (when set) is attached to this connection:
// a session id alone, without having resumed it with its secret, grants
// nothing.
func (c *clientConn) checkSession(id uint64) error {
	if id != 0 && !c.owns(id) {
		return fmt.Errorf("%w: session %d is not attached to this connection (resume it first)", session.ErrUnknownSession, id)
	}
	return nil
}

// serve runs the connection: Hello first, then every stream in its own
// goroutine, at most MaxRequestsPerConn at once. It returns when the
// connection ends, after every stream goroutine has.
func (c *clientConn) serve() {
	var wg sync.WaitGroup
	defer c.echo.Wait() // after wg.Wait: the last Wake is in a stream's goroutine
	defer wg.Wait()
	defer c.conn.CloseWithError(session.ConnClosed, "")
	// Echo liveness pings from the start: a client pings while its Hello
	// waits too, and Hello holds a request slot so that the echo goroutine
	// stays while it does.
	c.sem <- struct{}{}
	c.echo.Wake()
	ok := c.hello()
	<-c.sem
	if !ok {
		return
	}
	c.idle = c.idleTimer()
	defer c.idle.Stop()
	for {
		str, err := c.conn.AcceptStream(c.conn.Context())
		if err != nil {
			return
		}
		c.idle.Reset(c.f.s.cfg.IdleConnTimeout)
		if refused := c.take(); refused != nil {
			// Refused at once instead of queued: a client that floods one
			// connection slows only itself.
			str.SetWriteDeadline(time.Now().Add(time.Second))
			session.Reject(str, refused)
			session.EndStream(str)
			continue
		}
		// A request waits on the member: its client may ping. After take:
		// the echoer ends only when it sees no request in flight.
		c.echo.Wake()
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
func (c *clientConn) take() error {
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

func (c *clientConn) give() { <-c.sem; <-c.f.streams }

// idleTimer closes the connection once it has had no session and no
// request in flight for IdleConnTimeout; serve resets it on every stream,
// serveMux on every call.
func (c *clientConn) idleTimer() *time.Timer {
	timeout := c.f.s.cfg.IdleConnTimeout
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
func (c *clientConn) hello() bool {
	ctx, cancel := context.WithTimeout(c.conn.Context(), c.f.s.cfg.Transport.HandshakeTimeout+c.f.s.cfg.RequestReadTimeout)
	defer cancel()
	str, err := c.conn.AcceptStream(ctx)
	if err != nil {
		return false
	}
	defer session.EndStream(str)
	str.SetReadDeadline(time.Now().Add(c.f.s.cfg.RequestReadTimeout))
	req, err := session.ReadRequest(str, c.conn.MaxFrameSize())
	if err != nil {
		if !errors.Is(err, io.EOF) {
			session.Reject(str, requestError(err, c.f.s.cfg.RequestReadTimeout))
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

func (c *clientConn) helloResponse() *session.Response {
	return &session.Response{
		ProtocolVersion: session.ProtocolVersion,
		ServerID:        c.f.s.cfg.ID,
		Features:        c.f.features(),
	}
}

// features are the optional protocol features the member serves.
func (f *front) features() session.Feature {
	ft := session.FeatureKeepAliveBatch
	if !f.s.cfg.Transport.DisableMux {
		// The lock call is worth it only on the mux stream; a member
		// without the mux stands for one built before both.
		ft |= session.FeatureMux | session.FeatureLockCall
	}
	return ft | session.FeatureCache
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
func (c *clientConn) serveStream(str *quic.Stream, free func()) {
	defer session.EndStream(str)
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("request handler panicked", "panic", r, "stack", string(debug.Stack()))
			session.Reject(str, fmt.Errorf("%w: the request failed on the server", session.ErrInternal))
		}
	}()
	str.SetReadDeadline(time.Now().Add(c.f.s.cfg.RequestReadTimeout))
	req, err := session.ReadRequest(str, c.conn.MaxFrameSize())
	if err != nil {
		if !errors.Is(err, io.EOF) { // io.EOF: the client sent nothing at all
			c.debug("bad request", "err", err)
			session.Reject(str, requestError(err, c.f.s.cfg.RequestReadTimeout))
		}
		return
	}
	if req.Type == session.MsgLockNotices || req.Type == session.MsgMux || req.Type == session.MsgCache {
		free()
	}
	ctx, cancel := context.WithCancel(str.Context())
	defer cancel()
	stop := context.AfterFunc(c.f.s.ctx, cancel)
	defer stop()
	if req.Type == session.MsgMux {
		if c.f.s.cfg.Transport.DisableMux { // as a member built before it
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
// ErrBusy at once). A newer mux stream of the connection replaces this
// one. A client that breaks the protocol, or does not take its answers,
// loses the connection. Returns when the stream ends, after its calls.
func (c *clientConn) serveMux(ctx context.Context, str *quic.Stream) {
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
		c.idle.Reset(c.f.s.cfg.IdleConnTimeout)
		if _, ok := c.f.strm[call.Req.Type]; ok {
			reply(call, session.ErrorResponse(fmt.Errorf("%w: %v is a streaming request: send it on a stream of its own, not on the mux stream", session.ErrMalformed, call.Req.Type)))
			continue
		}
		if refused := c.take(); refused != nil {
			reply(call, session.ErrorResponse(refused))
			continue
		}
		if call.Req.Type != session.MsgKeepAlive {
			// A call waits on the member: its client may ping (after
			// take, as for a stream). Not for
			// a keepalive, the one call of an idle connection: it is
			// answered from the lease table in memory, waiting on
			// nothing but the CPU an echo would need too, and its
			// answer is what the client hears.
			c.echo.Wake()
		}
		wg.Add(1)
		c.f.workers.run(func() {
			defer wg.Done()
			defer c.give()
			defer func() {
				if r := recover(); r != nil {
					c.logger().Error("request handler panicked", "panic", r, "stack", string(debug.Stack()))
					reply(call, session.ErrorResponse(fmt.Errorf("%w: the request failed on the server", session.ErrInternal)))
				}
			}()
			reply(call, c.f.answer(call.Ctx, c, call.Req))
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
