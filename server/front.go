package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/lease"
	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// front is a member's client side: the request handlers (dispatch.go,
// dispatch_session.go and the parts' own), served over QUIC by package
// quicfront (which also runs admission control and the probe answers)
// and over HTTP by package httpapi; the watch hub, the leader's lease
// keeper and the lock service. Decisions DESIGN.md leaves open (the
// connection's are in quicfront/doc.go):
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

	quic *quicfront.Front // the QUIC listener, its connections and routing
	hub  *watch.Hub
	keep *lease.Keeper
	// observers are further observers of applied batches (observe).
	observers []ApplyObserver
	cache     *cacheTable // cache.go
	reads     readCounts  // staleread.go

	locks *locksvc.Service // the lock service (lock_member.go wires it)

	watchesBy   watchCounts // caps.go
	capRefusals capRefusals
}

// openFront makes the TLS config and binds the client listener, so that
// ClientAddr is known (port 0 resolved) before Start, like the raft and
// admin listeners. Connections are accepted from Start on.
func (s *Server) openFront() error {
	tlsConf, err := s.clientTLS()
	if err != nil {
		return err
	}
	f := &front{s: s, log: s.log}
	m := frontMember{f}
	cfg := &s.cfg
	q, err := quicfront.New(s.ctx, quicfront.Config{
		ID: cfg.ID, Addr: cfg.ClientAddr, Transport: cfg.Transport, Admission: cfg.Admission,
		MaxConns: cfg.MaxConns, MaxStreams: cfg.MaxStreams, MaxRequestsPerConn: cfg.MaxRequestsPerConn,
		IdleConnTimeout: cfg.IdleConnTimeout, RequestReadTimeout: cfg.RequestReadTimeout,
		MaxFailedResumesPerHost: cfg.MaxFailedResumesPerHost, Monotonic: cfg.Monotonic, Log: s.log,
	}, tlsConf, quicfront.Parts{
		Leader: m, Requests: m, Tickets: m, Go: s.goFunc,
		Closed: func(c *quicfront.Conn) { f.locks.ConnClosed(c) },
	})
	if err != nil {
		return err
	}
	if host, port, _ := net.SplitHostPort(cfg.ClientAddr); port == "0" {
		_, bound, _ := net.SplitHostPort(q.Addr().String())
		cfg.ClientAddr = net.JoinHostPort(host, bound)
	}
	f.quic = q
	f.hub = watch.NewHub(watch.Config{History: cfg.WatchHistory, Buffer: cfg.WatchBuffer,
		MaxBacklogBytes: cfg.MaxWatchBacklogBytes, MaxBytesPerConn: cfg.MaxWatchBytesPerConn}, s.fsm)
	f.keep = newLeaseKeeper(f)
	f.register()
	s.front = f
	s.fsm.SetObserver(s.applyObservers(cfg.Observer))
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

// startFront starts accepting clients, the lease keeper and the lock
// service's timers.
func (s *Server) startFront() {
	f := s.front
	f.quic.Start()
	s.goFunc(func() {
		s.followLeadership(s.stop, func(_ <-chan struct{}, sub <-chan bool) bool { return f.keep.Lead(s.ctx, sub) })
	})
	s.goFunc(func() { f.locks.RunTimers(s.stop) })
}

// dropClients closes every client connection with code (ConnShutdown,
// ConnNotLeader) and why: the clients reconnect, to the leader, and resume
// their sessions.
func (f *front) dropClients(code quic.ApplicationErrorCode, why string) {
	f.quic.DropClients(code, why)
}

// closeFront tells every client the member is going away and stops
// accepting; the connection goroutines end with their connections and are
// waited for by Close. Safe to call more than once, and before Start.
func (s *Server) closeFront() {
	if s.front != nil {
		s.front.quic.Close()
	}
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
