package httpapi

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
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
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

// Config is what an API is built from: the member's settings (see the
// server.Config fields named in each comment) and its lifetime.
type Config struct {
	ID   string // the member's ID
	Cell string // Config.Cell: paths outside it are refused ("": none)
	// Hosts are names the API answers to besides its own (APIHosts).
	Hosts []string
	// MaxRequests and MaxWatches bound the requests in flight and the
	// event streams open (APIMaxRequests, APIMaxWatches).
	MaxRequests, MaxWatches int
	// MaxBody bounds a request body (Transport.MaxFrameSize).
	MaxBody int
	// ApplyTimeout bounds a forwarded request's search for the leader.
	ApplyTimeout time.Duration
	// ClientTLS is the client front's TLS (certificate, client CA).
	ClientTLS *tls.Config
	// MemberCert is this member's certificate, presented when it
	// forwards; MemberCAs verify other members'.
	MemberCert tls.Certificate
	MemberCAs  *x509.CertPool
	// GatewayCAs issue gateway certificates (APIGatewayCA; nil: none).
	GatewayCAs *x509.CertPool
	// Stats is the member's sampler for the console's charts (a
	// *consolestats.Sampler the member runs).
	Stats Stats
	Log   *slog.Logger
	// Context ends when the member stops; Go runs a goroutine the member
	// waits for when it stops.
	Context context.Context
	Go      func(func())
}

// API serves the HTTP/JSON API and the web console of one member.
type API struct {
	cfg Config
	m   Member
	log *slog.Logger

	tls *tls.Config
	// ownCert is this member's certificate (DER): a peer presenting it
	// holds its key, so it is a member.
	ownCert []byte
	// verifyClients: client certificates are verified against the client
	// CA (else one that is not a member's names nobody).
	verifyClients bool
	fwd           *http.Client // to the leader's API, presenting ownCert
	routes        []apiRoute
	addr          string
	hosts         apiwire.HostSet // the Host names it answers to (guard.go)
	stats         Stats           // the console's charts (console_stats.go)
	gateways      *x509.CertPool  // issuers of gateway certificates (gateway.go); nil: none

	watches  atomic.Int64 // SSE streams open
	requests atomic.Int64 // other requests in flight
}

// New builds the API of member m: its TLS and its routes.
func New(cfg Config, m Member) (*API, error) {
	a := &API{cfg: cfg, m: m, log: cfg.Log, stats: cfg.Stats, gateways: cfg.GatewayCAs}
	conf, err := a.tlsConfig()
	if err != nil {
		return nil, err
	}
	a.tls = conf
	a.routes = a.routeTable()
	return a, nil
}

// TLSConfig is the TLS the API listens with.
func (a *API) TLSConfig() *tls.Config { return a.tls }

// Handler serves the API on addr, the address it listens on (its host
// is one of the names the API answers to).
func (a *API) Handler(addr string) http.Handler {
	a.addr = addr
	a.hosts = a.apiHosts()
	return a.handler()
}

// CloseIdleConnections closes the idle connections to other members'
// APIs, once the API stopped.
func (a *API) CloseIdleConnections() { a.fwd.CloseIdleConnections() }

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
func (a *API) handler() http.Handler {
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
func (a *API) methodsFor(r *http.Request) []string {
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

func (a *API) wrap(rt apiRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.stream {
			n := a.requests.Add(1)
			defer a.requests.Add(-1)
			if n > int64(a.cfg.MaxRequests) {
				apiError(w, fmt.Errorf("%w: %d api requests in flight on this member", session.ErrBusy, a.cfg.MaxRequests))
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
// (apiwire.Status). The member's errors are wire errors already (Member).
func apiError(w http.ResponseWriter, err error) { apiwire.WriteError(w, err) }

// writeJSON answers v as JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) { apiwire.WriteJSON(w, code, v) }

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
func (a *API) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.cfg.MaxBody)))
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
func (a *API) conn(r *http.Request, c caller) (Conn, uint64, error) {
	cc := a.m.Conn(c.identity)
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
	cc.Attach(id)
	return cc, id, nil
}

// checkSecret does resume's checks: the session exists, the secret is
// its own and the identity is the one that opened it.
func (a *API) checkSecret(id uint64, secret []byte, identity string) error {
	si, err := a.m.Session(id)
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
func (a *API) call(r *http.Request, cc Conn, req *session.Request) (*session.Response, error) {
	return cc.Call(r.Context(), req)
}
