package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// startDev runs a --dev member on free loopback ports.
func startDev(t testing.TB) *Server { t.Helper(); return startDevWith(t, nil) }

// startDevWith is startDev with configure applied to the config first.
func startDevWith(t testing.TB, configure func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Dev, cfg.DataDir = true, t.TempDir()
	cfg.ClientAddr, cfg.RaftAddr, cfg.HTTPAddr, cfg.APIAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if configure != nil {
		configure(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.front.keep.Serving() != nil {
		if time.Now().After(deadline) {
			t.Fatal("dev member never became a serving leader")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	return s
}

// Dev mode makes its PKI in <data-dir>/tls; a client presenting a
// certificate of the dev CA is identified by it, one without is still served.
// A handler that panics costs its request an ErrInternal, nothing more.
func TestDevFrontAndPanicGuard(t *testing.T) {
	s := startDev(t)
	if _, port, _ := net.SplitHostPort(s.ClientAddr()); port == "0" {
		t.Fatalf("client address %s: port not resolved", s.ClientAddr())
	}
	s.front.handleUnary(session.MsgSync, func(context.Context, *quicfront.Conn, *session.Request) (*session.Response, error) {
		panic("handler bug")
	})
	dir := filepath.Join(s.cfg.DataDir, devTLSDir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(cert, key string) *session.Conn {
		tlsConf, err := session.ClientTLS(filepath.Join(dir, "ca.pem"), cert, key)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := session.Dial(ctx, s.ClientAddr(), tlsConf, session.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := session.Hello(ctx, conn, "dev-test"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	rt := func(conn *session.Conn, req *session.Request) *session.Response {
		resp, err := session.RoundTrip(ctx, conn, req)
		if err != nil {
			t.Fatalf("%v: %v", req.Type, err)
		}
		return resp
	}
	dc, err := session.EnsureDevCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := dc.Client("dev-alice")
	if err != nil {
		t.Fatal(err)
	}
	withCert := dial(cert, key)
	anon := dial("", "")

	if err := rt(withCert, &session.Request{Type: session.MsgSync}).Err(); !errors.Is(err, session.ErrInternal) {
		t.Fatalf("panicking handler: %v", err)
	}
	for _, conn := range []*session.Conn{withCert, anon} {
		if err := rt(conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 5000}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	list := rt(anon, &session.Request{Type: session.MsgSessions})
	if len(list.Sessions) != 2 || list.Sessions[0].Identity != "dev-alice" || list.Sessions[1].Identity != "" {
		t.Fatalf("sessions %+v", list.Sessions)
	}
}

// A session whose open committed but whose handler never answered (the
// client left) still gets a lease from the applied event, so it expires
// instead of living forever.
func TestLeaseForSessionOpenedWithoutHandler(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 1000, Secret: []byte("0123456789abcdef")})
	if err != nil || res.Err != nil {
		t.Fatal(err, res)
	}
	if !s.front.keep.Has(res.Session) {
		t.Fatal("no lease for a session opened outside the handler")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Store().Session(res.Session)
		if errors.Is(err, namespace.ErrNoSession) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session not expired: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}
