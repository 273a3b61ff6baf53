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
//     status per code (apiwire.Status). Bodies are JSON objects of at most
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
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/server/consolestats"
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
	hdrSession = apiwire.HeaderSession
	// hdrIdentity carries the caller's identity on a request a member
	// forwards to the leader; hdrForwarded names the forwarding member.
	hdrIdentity  = apiwire.HeaderIdentity
	hdrForwarded = "Latch-Forwarded-By"
	// hdrRetry on a 503 says the request was not acted on: the forwarding
	// member may send it to the leader again.
	hdrRetry = apiwire.HeaderRetry
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
	hosts         apiwire.HostSet       // the Host names it answers to (api_guard.go)
	stats         *consolestats.Sampler // the console's charts (api_console_stats.go)
	gateways      *x509.CertPool        // issuers of gateway certificates (api_gateway.go); nil: none

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
	a.stats = consolestats.New(s.statsSource())
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
	s.goFunc(func() { a.stats.Run(s.stop) })
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

// apiErrorBody is the JSON body of every API error.
type apiErrorBody = apiwire.ErrorBody

// apiError writes err with its wire code and the HTTP status of the code
// (apiwire.Status), after naming a member's own refusals by their wire
// errors.
func apiError(w http.ResponseWriter, err error) { apiwire.WriteError(w, wireError(err)) }

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
