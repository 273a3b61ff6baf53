package server

// The HTTP/JSON API: a second front beside the QUIC one. It holds no logic
// of its own: every request becomes the session.Request the QUIC front
// would have received and runs through the same handlers (front.call), or,
// for the streaming calls (locks, watches), through the same lock service
// and watch hub. Decisions:
//
//   - It listens on its own TCP address, Config.APIAddr (latchd
//     --api-addr, default 127.0.0.1:7423; "" in Config: no API), with the
//     client front's certificate and client CA, so console users and
//     scripts need no admin certificate. With a client CA a client
//     certificate is required, as on QUIC; the identity is
//     session.Identity of the peer certificate.
//   - Any member serves any request: a follower forwards it to the
//     leader's API itself (API clients never see a redirect), presenting
//     this member's certificate and the caller's identity in the
//     Latch-Identity header. The leader believes that header only from a
//     peer whose certificate is a member's (isMemberCert); from anyone
//     else it is ignored, except from a gateway (api_gateway.go), whose
//     certificate comes from Config.APIGatewayCA. A forwarded request is
//     never forwarded again: a member that is not the leader answers 503
//     with Latch-Retry, and the first member looks for the leader again
//     until ApplyTimeout.
//     Watches, election observation, stale reads (?stale=true on nodes,
//     children and stat) and the console's static files are served by the
//     member itself from its own applied state.
//   - Sessions: open returns a token "<id>.<secret hex>" that later
//     requests carry in the Latch-Session header; the secret is checked
//     on every request as a resume would check it. A lock request without
//     a session may give client_id and ttl_ms: it then holds the lock on an
//     implicit lease, a session of its own with TTL ttl_ms (clamped into
//     the session bounds) and a hold TTL of ttl_ms. The acquire answer's
//     lease_token (that session's token: its secret is in the log, so any
//     later leader checks it) is what renew and release need; client_id is
//     only a label the queue shows. Renew keeps both alive (and may change
//     ttl_ms), release closes that session.
//   - Errors are {"code": session.Code, "name", "message"} with an HTTP
//     status per code (apiStatus). Bodies are JSON objects of at most
//     Transport.MaxFrameSize bytes with no unknown fields.

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// DefaultAPIAddr is where latchd serves the HTTP/JSON API and the web
// console unless --api-addr says otherwise.
const DefaultAPIAddr = "127.0.0.1:7423"

// API defaults (see the Config fields of the same names).
const (
	DefaultAPIMaxRequests = 4096
	DefaultAPIMaxWatches  = 10000
)

// Headers of the API.
const (
	// hdrSession carries a session token "<id>.<secret hex>".
	hdrSession = "Latch-Session"
	// hdrIdentity carries the caller's identity on a request a member
	// forwards to the leader; hdrForwarded names the forwarding member.
	hdrIdentity  = "Latch-Identity"
	hdrForwarded = "Latch-Forwarded-By"
	// hdrRetry on a 503 says the request was not acted on: the forwarding
	// member may send it to the leader again.
	hdrRetry = "Latch-Retry"
)

// apiFront serves the HTTP/JSON API and the web console of one member.
type apiFront struct {
	s   *Server
	f   *front
	log *slog.Logger

	ln   net.Listener
	srv  *http.Server
	addr string
	// ownCert is this member's certificate (DER): a peer presenting it
	// holds its key, so it is a member.
	ownCert []byte
	// verifyClients: client certificates are verified against the client
	// CA (else one that is not a member's names nobody).
	verifyClients bool
	fwd           *http.Client // to the leader's API, presenting ownCert
	routes        []apiRoute
	hosts         apiHostSet     // the Host names it answers to (api_guard.go)
	stats         *consoleStats  // the console's charts (api_console_stats.go)
	gateways      *x509.CertPool // issuers of gateway certificates (api_gateway.go); nil: none

	watches  atomic.Int64 // SSE streams open
	requests atomic.Int64 // other requests in flight
}

// openAPI binds the API listener (port 0 resolves before Start).
func (s *Server) openAPI() error {
	if s.cfg.APIAddr == "" {
		return nil
	}
	a := &apiFront{s: s, f: s.front, log: s.log.With("front", "api")}
	conf, err := a.tlsConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("latch: api on %s: %w", s.cfg.APIAddr, err)
	}
	a.ln = tls.NewListener(ln, conf)
	a.addr = ln.Addr().String()
	a.hosts = a.apiHosts()
	a.routes = a.routeTable()
	a.stats = newConsoleStats(s.statsSource())
	s.api = a
	s.front.observe(a.stats)
	return nil
}

// apiAddr is the API address other members forward to ("" without one).
func (s *Server) apiAddr() string {
	if s.api == nil {
		return ""
	}
	return s.api.addr
}

// APIAddr returns the address the HTTP/JSON API listens on ("" when off).
func (s *Server) APIAddr() string { return s.apiAddr() }

func (s *Server) startAPI() {
	a := s.api
	if a == nil {
		return
	}
	a.srv = &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute, // an idle keep-alive connection holds nothing for long
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	s.goFunc(func() { a.stats.run(s.stop) })
	s.goFunc(func() {
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("api stopped", "err", err)
		}
	})
}

// closeAPI stops the API; s.ctx has ended, so long polls and event
// streams return.
func (s *Server) closeAPI() {
	a := s.api
	if a == nil {
		return
	}
	if a.srv == nil {
		a.ln.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
	}
	a.fwd.CloseIdleConnections()
}

// tlsConfig is the client front's TLS (certificate, client CA) for HTTP.
// A member's certificate is accepted as a client certificate too (it
// forwards), and is recognised by isMemberCert.
func (a *apiFront) tlsConfig() (*tls.Config, error) {
	base, err := a.s.clientTLS()
	if err != nil {
		return nil, err
	}
	if len(base.Certificates) == 0 || len(base.Certificates[0].Certificate) == 0 {
		return nil, fmt.Errorf("%w: the api needs the client front's certificate", ErrBadConfig)
	}
	a.ownCert = base.Certificates[0].Certificate[0]
	pool, required := base.ClientCAs, base.ClientAuth == tls.RequireAndVerifyClientCert
	a.verifyClients = pool != nil
	c := base.Clone()
	c.NextProtos = []string{"h2", "http/1.1"}
	c.ClientAuth = tls.RequestClientCert
	if required {
		c.ClientAuth = tls.RequireAnyClientCert
	}
	if a.gateways, err = loadGatewayCA(a.s.cfg.APIGatewayCA); err != nil {
		return nil, err
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || a.isMemberCert(cs.PeerCertificates) || a.isGatewayCert(cs.PeerCertificates) {
			return nil // required: RequireAnyClientCert refused it already
		}
		if pool == nil {
			return nil // not verified, so it names nobody (callerOf)
		}
		return session.VerifyChain(cs.PeerCertificates, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	}
	fwdTLS := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{a.s.memberTLS.Cert},
		// The leader must present a member's certificate; the name it
		// was issued for is irrelevant (members dial by address).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !a.isMemberCert(cs.PeerCertificates) {
				return errors.New("latch: the leader's api did not present a member certificate")
			}
			return nil
		},
	}
	a.fwd = &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		TLSClientConfig:     fwdTLS,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
	}}
	return c, nil
}

// isMemberCert reports whether a peer's chain (leaf first) is a member's:
// the certificate this member serves with (members may share the client
// front's certificate, as `latchd --dev` and the process harness do), or
// a member certificate of the cluster CA (session.MemberID), which
// forwards present, verified through the intermediates the peer sent as
// raft connections verify it.
func (a *apiFront) isMemberCert(chain []*x509.Certificate) bool {
	if subtle.ConstantTimeCompare(chain[0].Raw, a.ownCert) == 1 {
		return true
	}
	if _, ok := session.MemberID(chain[0]); !ok {
		return false
	}
	return session.VerifyChain(chain, x509.VerifyOptions{Roots: a.s.memberTLS.CAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}) == nil
}

// caller is who sent an API request.
type caller struct {
	identity  string
	member    bool // the peer holds a member certificate
	forwarded bool // a member forwarded the request on the identity's behalf
}

func (a *apiFront) callerOf(r *http.Request) caller {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return caller{}
	}
	if a.isMemberCert(r.TLS.PeerCertificates) {
		c := caller{identity: session.Identity(*r.TLS), member: true}
		if r.Header.Get(hdrForwarded) != "" {
			c.forwarded, c.identity = true, r.Header.Get(hdrIdentity)
		}
		return c
	}
	if a.isGatewayCert(r.TLS.PeerCertificates) {
		return caller{identity: r.Header.Get(hdrIdentity)} // api_gateway.go
	}
	if !a.verifyClients {
		return caller{} // an unverified certificate names nobody
	}
	return caller{identity: session.Identity(*r.TLS)}
}

// apiRoute is one route of the API: where it is served and by whom.
type apiRoute struct {
	method, pattern string
	// local routes are served by any member from its own state; the
	// others by the leader (followers forward them).
	local bool
	// staleLocal routes are local when the request asks ?stale=true: a
	// stale read is answered by the member asked, from its own state.
	staleLocal bool
	// stream routes count against APIMaxWatches, not APIMaxRequests.
	stream bool
	h      apiHandler
}

// apiHandler serves one API request for c.
type apiHandler func(w http.ResponseWriter, r *http.Request, c caller)

// handler routes requests, forwards leader-only ones from followers, and
// turns panics, unknown routes and wrong methods into coded errors.
func (a *apiFront) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.routes {
		mux.Handle(rt.method+" "+rt.pattern, a.wrap(rt))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				a.log.Error("api handler panicked", "panic", p, "stack", string(debug.Stack()))
				apiError(w, fmt.Errorf("%w: the request failed on the server", session.ErrInternal))
			}
		}()
		if !a.guard(w, r) {
			return
		}
		if p := r.URL.Path; strings.Contains(p, "//") || strings.Contains(p+"/", "/./") || strings.Contains(p+"/", "/../") {
			// ServeMux would redirect to the cleaned path: refuse instead.
			apiError(w, fmt.Errorf("%w: %q has an empty, . or .. component", namespace.ErrBadPath, p))
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			// No route: tell a wrong method from a wrong path.
			if allowed := a.methodsFor(r); len(allowed) > 0 {
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				apiError(w, fmt.Errorf("%w: %s %s (allowed: %s)", session.ErrMethodNotAllowed, r.Method, r.URL.Path, strings.Join(allowed, ", ")))
				return
			}
			apiError(w, fmt.Errorf("%w: %s %s", session.ErrNoRoute, r.Method, r.URL.Path))
			return
		}
		mux.ServeHTTP(w, r) // sets the path values
	})
}

// methodsFor lists the methods whose routes match r's path.
func (a *apiFront) methodsFor(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		mux := http.NewServeMux()
		for _, rt := range a.routes {
			if rt.method == m {
				mux.Handle(rt.method+" "+rt.pattern, http.NotFoundHandler())
			}
		}
		if _, p := mux.Handler(probe); p != "" {
			out = append(out, m)
		}
	}
	return out
}

func (a *apiFront) wrap(rt apiRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.stream {
			n := a.requests.Add(1)
			defer a.requests.Add(-1)
			if n > int64(a.s.cfg.APIMaxRequests) {
				apiError(w, fmt.Errorf("%w: %d api requests in flight on this member", session.ErrBusy, a.s.cfg.APIMaxRequests))
				return
			}
		}
		if err := a.checkCell(r, rt); err != nil {
			apiError(w, err) // the same refusal as the QUIC front's
			return
		}
		c := a.callerOf(r)
		if stale, err := staleParam(r); rt.local || rt.staleLocal && stale && err == nil {
			rt.h(w, r, c)
			return
		}
		a.atLeader(w, r, c, rt.h)
	})
}

// notLeaderAPI is the error of a member that cannot serve a leader-only
// request now.
func (s *Server) notLeaderAPI() error {
	if id, _ := s.Leader(); id == "" || id == s.cfg.ID {
		return fmt.Errorf("%w: no ready leader is known yet", session.ErrNoLeader)
	}
	return session.NotLeader("")
}

// forwardPoll is how often a forwarding member looks for the leader while
// none is known or reachable.
const forwardPoll = 20 * time.Millisecond

// atLeader serves r where the ready leader is: here, or forwarded to the
// leader's API on c's behalf with the answer copied back. While no
// leader is known or reachable, or the attempt was not acted on (this
// member lost leadership first, or the member reached says Latch-Retry),
// it tries again until ApplyTimeout. A forwarded request that reached a
// leader and failed on the way back is not resent unless it only reads
// (503 UnknownOutcome). A request forwarded to this member is never
// forwarded again: its first member looks again.
func (a *apiFront) atLeader(w http.ResponseWriter, r *http.Request, c caller, h apiHandler) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.s.cfg.Transport.MaxFrameSize)))
	if err != nil {
		apiError(w, bodyError(err))
		return
	}
	ctx := r.Context()
	deadline := time.NewTimer(a.s.cfg.ApplyTimeout)
	defer deadline.Stop()
	readOnly := r.Method == http.MethodGet
	for {
		lid, _ := a.s.Leader()
		switch {
		case a.s.IsLeader():
			r.Body = io.NopCloser(bytes.NewReader(body))
			rw := &retryWriter{ResponseWriter: w, pass: c.forwarded}
			h(rw, r, c)
			if !rw.retry {
				return
			}
		case c.forwarded:
			w.Header().Set(hdrRetry, "leader")
			apiError(w, a.s.notLeaderAPI())
			return
		case lid != "" && lid != a.s.cfg.ID:
			if addr := a.s.memberInfo(lid).APIAddr; addr != "" {
				done, err := a.forwardTo(ctx, w, r, c, addr, body)
				if done {
					return
				}
				if err != nil && !readOnly {
					apiError(w, fmt.Errorf("%w: forwarding to the leader: %v", session.ErrUnknownOutcome, err))
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return // the caller left
		case <-deadline.C:
			apiError(w, fmt.Errorf("%w: no leader reachable within %v", session.ErrNoLeader, a.s.cfg.ApplyTimeout))
			return
		case <-time.After(forwardPoll):
		}
	}
}

// retryWriter swallows an answer that says it was not acted on (503
// with Latch-Retry), so atLeader can try again, unless pass (the request
// was forwarded: the member that forwarded it retries).
type retryWriter struct {
	http.ResponseWriter
	pass  bool
	retry bool
}

func (rw *retryWriter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable && rw.Header().Get(hdrRetry) != "" && !rw.pass {
		rw.retry = true
		rw.Header().Del(hdrRetry)
		rw.Header().Del("Content-Type")
		return
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *retryWriter) Write(b []byte) (int, error) {
	if rw.retry {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush event streams.
func (rw *retryWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// forwardTo sends one attempt to addr. done: the answer was written.
// A nil error with !done means the request was not acted on (it never
// left, or the member said Latch-Retry): try again.
func (a *apiFront) forwardTo(ctx context.Context, w http.ResponseWriter, r *http.Request, c caller, addr string, body []byte) (done bool, err error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "https://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		apiError(w, fmt.Errorf("%w: %v", session.ErrInternal, err))
		return true, nil
	}
	for _, h := range []string{"Content-Type", "Accept", hdrSession, "Last-Event-ID"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(hdrForwarded, a.s.cfg.ID)
	req.Header.Set(hdrIdentity, c.identity)
	resp, err := a.fwd.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false, nil // never sent
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(hdrRetry) != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return false, nil
	}
	var whole []byte
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// Read an answer whole before passing it on: a leader that dies
		// half way through must not leave the caller a truncated body
		// under a success status.
		if whole, err = io.ReadAll(io.LimitReader(resp.Body, 4*int64(a.s.cfg.Transport.MaxFrameSize))); err != nil {
			return false, err
		}
	}
	for k, vs := range resp.Header {
		if k == hdrRetry {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if whole != nil {
		w.Write(whole)
		return true, nil
	}
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return true, nil
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			return true, nil
		}
	}
}

// apiErrorBody is the JSON body of every API error.
type apiErrorBody struct {
	Code    session.Code `json:"code"`
	Name    string       `json:"name"`
	Message string       `json:"message"`
}

// apiError writes err with its wire code and the HTTP status of the code.
func apiError(w http.ResponseWriter, err error) {
	err = wireError(err)
	code := session.CodeOf(err)
	if code == session.CodeNotLeader || code == session.CodeNoLeader {
		// Not acted on: a forwarding member may retry elsewhere.
		if w.Header().Get(hdrRetry) == "" {
			w.Header().Set(hdrRetry, "leader")
		}
	}
	writeJSON(w, apiStatus(code), apiErrorBody{Code: code, Name: code.String(), Message: err.Error()})
}

// apiStatus is the HTTP status of a wire code.
func apiStatus(c session.Code) int {
	switch c {
	case session.CodeNoNode, session.CodeNoMember, session.CodeNoRoute, session.CodeNoElectionLeader:
		return http.StatusNotFound
	case session.CodeNodeExists, session.CodeBadVersion, session.CodeNotEmpty,
		session.CodeWouldDeadlock, session.CodeNotHeld, session.CodeLocked:
		return http.StatusConflict
	case session.CodeBadPath, session.CodeEphemeralParent, session.CodeTooManyOps, session.CodeRootImmutable,
		session.CodeBadCommand, session.CodeMalformed, session.CodeUnknownType, session.CodeVersion:
		return http.StatusBadRequest
	case session.CodeDataTooLarge, session.CodeFrameTooLarge:
		return http.StatusRequestEntityTooLarge
	case session.CodeNoSession, session.CodeSessionExpired:
		return http.StatusGone
	case session.CodeUnknownSession, session.CodeBadSecret:
		return http.StatusUnauthorized
	case session.CodePermissionDenied:
		return http.StatusForbidden
	case session.CodeReservedName:
		return http.StatusBadRequest
	case session.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case session.CodeWrongCell:
		return http.StatusMisdirectedRequest
	case session.CodeTooManyWatches, session.CodeTooManySessions, session.CodeBusy:
		return http.StatusTooManyRequests
	case session.CodeTimeout:
		return http.StatusGatewayTimeout
	case session.CodeCanceled:
		return http.StatusRequestTimeout
	case session.CodeNotLeader, session.CodeNoLeader, session.CodeClosed, session.CodeUnknownOutcome, session.CodeBehind:
		return http.StatusServiceUnavailable
	case session.CodeInternal:
		return http.StatusInternalServerError
	}
	// Codes this front does not know yet (later workstreams' refusals)
	// are the client's to fix.
	return http.StatusBadRequest
}

// bodyError names why a body could not be read.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("%w: request body over %d bytes", session.ErrFrameTooLarge, tooBig.Limit)
	}
	return fmt.Errorf("%w: reading request body: %v", session.ErrMalformed, err)
}

// decodeJSON reads r's body, a JSON object with no unknown fields, into
// v. An empty body leaves v as it is.
func (a *apiFront) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.s.cfg.Transport.MaxFrameSize)))
	if err != nil {
		return bodyError(err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", session.ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: request body: more than one JSON value", session.ErrMalformed)
	}
	return nil
}

// conn is the view of the QUIC front's handlers of one API request: a
// connection of c's identity with the request's session attached once its
// token checked out. It returns the session id (0 without a token).
func (a *apiFront) conn(r *http.Request, c caller) (*clientConn, uint64, error) {
	cc := &clientConn{f: a.f, identity: c.identity, attached: map[uint64]struct{}{}}
	tok := r.Header.Get(hdrSession)
	if tok == "" {
		return cc, 0, nil
	}
	id, secret, err := parseSessionToken(tok)
	if err != nil {
		return nil, 0, err
	}
	if err := a.checkSecret(id, secret, c.identity); err != nil {
		return nil, 0, err
	}
	cc.attach(id)
	return cc, id, nil
}

// checkSecret does resume's checks: the session exists, the secret is
// its own and the identity is the one that opened it.
func (a *apiFront) checkSecret(id uint64, secret []byte, identity string) error {
	si, err := a.s.store.Session(id)
	if errors.Is(err, namespace.ErrNoSession) {
		return fmt.Errorf("%w: session %d", session.ErrSessionExpired, id)
	}
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(si.Secret, secret) != 1 || (si.Identity != "" && si.Identity != identity) {
		return fmt.Errorf("%w: session %d", session.ErrBadSecret, id)
	}
	return nil
}

func sessionToken(id uint64, secret []byte) string {
	return strconv.FormatUint(id, 10) + "." + hex.EncodeToString(secret)
}

func parseSessionToken(tok string) (uint64, []byte, error) {
	idPart, secPart, ok := strings.Cut(tok, ".")
	id, err := strconv.ParseUint(idPart, 10, 64)
	if !ok || err != nil || id == 0 {
		return 0, nil, fmt.Errorf("%w: %s is not \"<id>.<secret hex>\"", session.ErrUnknownSession, hdrSession)
	}
	secret, err := hex.DecodeString(secPart)
	if err != nil || len(secret) == 0 {
		return 0, nil, fmt.Errorf("%w: %s secret is not hex", session.ErrBadSecret, hdrSession)
	}
	return id, secret, nil
}

// call runs req through the QUIC front's handler of its type.
func (a *apiFront) call(r *http.Request, cc *clientConn, req *session.Request) (*session.Response, error) {
	return a.f.call(r.Context(), cc, req)
}
