package quicfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// testMember is the member a front test gives: a leader that serves, a
// cell check refusing "/elsewhere", and a book of what was served.
type testMember struct {
	mu     sync.Mutex
	served []error // the error of every request booked, nil for success
}

func (m *testMember) Serving() error           { return nil }
func (m *testMember) LeaderClientAddr() string { return "" }
func (m *testMember) SubscribeLeadership() (<-chan bool, func()) {
	return make(chan bool), func() {}
}

var errElsewhere = errors.New("test: outside the cell")

func (m *testMember) Check(req *session.Request) error {
	if req.Path == "/elsewhere" {
		return fmt.Errorf("%w: %w", session.ErrWrongCell, errElsewhere)
	}
	return nil
}

func (m *testMember) WireError(err error) error { return err }

func (m *testMember) Served(_ session.MsgType, _ time.Time, err error, _ bool) {
	m.mu.Lock()
	m.served = append(m.served, err)
	m.mu.Unlock()
}

func (m *testMember) PeerTicketKeys(context.Context) ([][32]byte, bool) { return [][32]byte{}, true }

// startFront runs a front on a free loopback port with TLS from a dev PKI
// in a temporary directory, and returns it with a dialer. Cleanup closes
// it and waits for every goroutine it started.
func startFront(t *testing.T, m *testMember, install func(*Front)) (*Front, func() *session.Conn) {
	t.Helper()
	dc, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := session.ServerTLS(dc.ServerCert, dc.ServerKey, "")
	if err != nil {
		t.Fatal(err)
	}
	adm := AdmissionConfig{}
	adm.FillDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f, err := New(ctx, Config{
		ID: "t1", Addr: "127.0.0.1:0", Transport: session.DefaultConfig(), Admission: adm,
		MaxConns: 16, MaxStreams: 64, MaxRequestsPerConn: 8,
		IdleConnTimeout: time.Minute, RequestReadTimeout: 10 * time.Second,
		MaxFailedResumesPerHost: DefaultMaxFailedResumesPerHost,
		Monotonic:               func() time.Duration { return 0 },
		Log:                     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, tlsConf, Parts{Leader: m, Requests: m, Tickets: m, Go: func(g func()) { wg.Go(g) }})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	install(f)
	f.Start()
	t.Cleanup(func() {
		cancel()
		f.Close()
		wg.Wait() // a goroutine of the front that outlives its member hangs here
	})
	clientTLS, err := session.ClientTLS(dc.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	dial := func() *session.Conn {
		t.Helper()
		dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer dcancel()
		conn, err := session.Dial(dctx, f.Addr().String(), clientTLS, session.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		hello, err := session.Hello(dctx, conn, "front-test")
		if err != nil {
			t.Fatal(err)
		}
		if hello.ServerID != "t1" || hello.Features&session.FeatureMux == 0 {
			t.Fatalf("hello answered %+v", hello)
		}
		return conn
	}
	return f, dial
}

// The front routes each request to the member's handler for its type,
// and only after its own checks and the member's: a session the
// connection did not attach, a path the member's Check refuses, a type
// nobody serves. A handler's panic costs its request an ErrInternal. The
// front runs on a fake member, with no raft and no store: what a bug in
// the routing (a check skipped, a refusal not booked, a goroutine left
// running after Close) would break shows here alone.
func TestFrontRoutesThroughItsParts(t *testing.T) {
	m := &testMember{}
	f, dial := startFront(t, m, func(f *Front) {
		f.HandleUnary(session.MsgSync, func(context.Context, *Conn, *session.Request) (*session.Response, error) {
			return &session.Response{Rev: 7}, nil
		})
		f.HandleUnary(session.MsgGet, func(context.Context, *Conn, *session.Request) (*session.Response, error) {
			panic("handler bug")
		})
		f.HandleUnary(session.MsgOpenSession, func(_ context.Context, c *Conn, _ *session.Request) (*session.Response, error) {
			c.Attach(42)
			return &session.Response{Session: 42}, nil
		})
	})
	conn := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt := func(req *session.Request) (*session.Response, error) {
		t.Helper()
		resp, err := session.RoundTrip(ctx, conn, req)
		if err != nil {
			t.Fatalf("%v: %v", req.Type, err)
		}
		return resp, resp.Err()
	}

	if resp, err := rt(&session.Request{Type: session.MsgSync}); err != nil || resp.Rev != 7 {
		t.Fatalf("sync: %+v %v", resp, err)
	}
	if _, err := rt(&session.Request{Type: session.MsgGet, Path: "/a"}); !errors.Is(err, session.ErrInternal) {
		t.Fatalf("panicking handler: %v", err)
	}
	if _, err := rt(&session.Request{Type: session.MsgSync, Session: 42}); !errors.Is(err, session.ErrUnknownSession) {
		t.Fatalf("a session the connection never attached: %v", err)
	}
	if _, err := rt(&session.Request{Type: session.MsgSync, Path: "/elsewhere"}); !errors.Is(err, session.ErrWrongCell) {
		t.Fatalf("a request the member's Check refuses: %v", err)
	}
	if _, err := rt(&session.Request{Type: session.MsgChildren, Path: "/a"}); !errors.Is(err, session.ErrUnknownType) {
		t.Fatalf("a type no handler serves: %v", err)
	}
	if _, err := rt(&session.Request{Type: session.MsgOpenSession}); err != nil {
		t.Fatal(err)
	}
	if resp, err := rt(&session.Request{Type: session.MsgSync, Session: 42}); err != nil || resp.Rev != 7 {
		t.Fatalf("sync naming the session the connection opened: %+v %v", resp, err)
	}
	// Another front's request (NewConn) goes through the same checks.
	if _, err := f.Call(ctx, f.NewConn(""), &session.Request{Type: session.MsgSync, Session: 42}); !errors.Is(err, session.ErrUnknownSession) {
		t.Fatalf("Call naming a session its Conn does not hold: %v", err)
	}
	if f.Connections() != 1 {
		t.Fatalf("%d connections open, want 1", f.Connections())
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	refused := 0
	for _, err := range m.served {
		if errors.Is(err, errElsewhere) {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("the member's refusal was booked %d times, want once (%v)", refused, m.served)
	}
}

// The probe answer is the member's word: it serves sessions, and it
// reserves a slot for a client that asks.
func TestFrontAnswersProbes(t *testing.T) {
	f, _ := startFront(t, &testMember{}, func(*Front) {})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := session.Probe(ctx, f.Addr().String(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if a.Member != "t1" || !a.IsLeader || a.Leader != "" {
		t.Fatalf("probe answered %+v", a)
	}
}
