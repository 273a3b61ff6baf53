package server

// The HTTP/JSON API's wiring: package httpapi serves it (its doc.go has
// the design) through the interface it declares (httpapi.Member, which
// api_member.go implements); this member binds its listener, runs its
// http.Server and the console's sampler, and stops them.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/server/consolestats"
	"github.com/latch-io/latch/server/httpapi"
)

// DefaultAPIAddr is where latchd serves the HTTP/JSON API and the web
// console unless --api-addr says otherwise.
const DefaultAPIAddr = "127.0.0.1:7423"

// API defaults (see the Config fields of the same names).
const (
	DefaultAPIMaxRequests = 4096
	DefaultAPIMaxWatches  = 10000
)

// APIAnyHost in Config.APIHosts turns the Host check off (a proxy in
// front that rewrites Host, for instance).
const APIAnyHost = apiwire.AnyHost

// apiFront is this member's HTTP/JSON API and web console as it runs.
type apiFront struct {
	api   *httpapi.API
	h     http.Handler
	ln    net.Listener
	srv   *http.Server
	addr  string
	log   *slog.Logger
	stats *consolestats.Sampler // the console's charts
}

// openAPI binds the API listener (port 0 resolves before Start).
func (s *Server) openAPI() error {
	if s.cfg.APIAddr == "" {
		return nil
	}
	clientTLS, err := s.clientTLS()
	if err != nil {
		return err
	}
	gateways, err := loadGatewayCA(s.cfg.APIGatewayCA)
	if err != nil {
		return err
	}
	a := &apiFront{log: s.log.With("front", "api"), stats: consolestats.New(s.statsSource())}
	a.api, err = httpapi.New(httpapi.Config{
		ID: s.cfg.ID, Cell: s.cfg.Cell, Hosts: s.cfg.APIHosts,
		MaxRequests: s.cfg.APIMaxRequests, MaxWatches: s.cfg.APIMaxWatches,
		MaxBody: s.cfg.Transport.MaxFrameSize, ApplyTimeout: s.cfg.ApplyTimeout,
		ClientTLS: clientTLS, MemberCert: s.memberTLS.Cert, MemberCAs: s.memberTLS.CAs, GatewayCAs: gateways,
		Stats: a.stats, Log: a.log, Context: s.ctx, Go: s.goFunc,
	}, apiMember{s: s, f: s.front})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	ln, err := net.Listen("tcp", s.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("latch: api on %s: %w", s.cfg.APIAddr, err)
	}
	a.ln = tls.NewListener(ln, a.api.TLSConfig())
	a.addr = ln.Addr().String()
	a.h = a.api.Handler(a.addr)
	s.api = a
	s.front.observe(a.stats)
	return nil
}

// handler is the API's routed handler.
func (a *apiFront) handler() http.Handler { return a.h }

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
		Handler:           a.h,
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
	a.api.CloseIdleConnections()
}

// loadGatewayCA reads Config.APIGatewayCA: the issuers of the gateway
// certificates the API believes for the identity they name
// (server/httpapi/gateway.go).
func loadGatewayCA(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: APIGatewayCA: %v", ErrBadConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: APIGatewayCA: %s holds no PEM certificate", ErrBadConfig, file)
	}
	return pool, nil
}

// statsSource wires a member's sampler to it.
func (s *Server) statsSource() consolestats.Source {
	return consolestats.Source{
		ID:  s.cfg.ID,
		Now: time.Now,
		Term: func() uint64 {
			if r := s.raft; r != nil {
				return r.CurrentTerm()
			}
			return 0
		},
		Leader: s.IsLeader,
		Writes: func() float64 {
			if m := s.metrics; m != nil {
				return consolestats.MetricValue(m.ok) + consolestats.MetricValue(m.rejected)
			}
			return 0
		},
		Sessions: func() (int, error) {
			ss, err := s.store.Sessions()
			return len(ss), err
		},
		Locks: func() (int, int, error) {
			c, err := s.store.CountLocks()
			return c.Held, c.Waiting, err
		},
		Requests: requestsTotal,
		Latency:  requestSeconds,
	}
}
