package server

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// serverConnGoroutines counts the goroutines serving client connections
// (their stacks run through quicfront.Conn).
func serverConnGoroutines(t testing.TB) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "latch/server/quicfront.(*Conn)") {
			n++
		}
	}
	return n
}

// An idle connection holding a session costs the member a bounded number
// of goroutines of its own: the stream accept loop, the ping echo and the
// mux stream's reader. A goroutine added per connection (a timer loop, a
// writer, a keepalive handled off the reader) fails this: with thousands
// of idle clients each one is a stack per client.
func TestIdleConnGoroutinesBounded(t *testing.T) {
	const conns, perConn = 50, 3
	s := startDev(t)
	tlsConf, err := session.ClientTLS(s.cfg.DataDir+"/"+devTLSDir+"/ca.pem", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := serverConnGoroutines(t)
	for i := range conns {
		// FailureTimeout: the client negotiates datagrams, so the member
		// echoes its pings (a goroutine of its own).
		conn, err := session.Dial(ctx, s.ClientAddr(), tlsConf, session.Config{FailureTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := session.Hello(ctx, conn, "idle"); err != nil {
			t.Fatal(err)
		}
		open, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 60000})
		if err != nil || open.Err() != nil {
			t.Fatalf("conn %d: open session: %v %v", i, err, open.Err())
		}
		ka, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgKeepAlive, Session: open.Session})
		if err != nil || ka.Err() != nil || ka.TTLMillis != 60000 {
			t.Fatalf("conn %d: keepalive: %v %+v", i, err, ka)
		}
	}
	// Handlers that just answered may still be on their way out: poll
	// until the count is within the bound, and fail at the deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := serverConnGoroutines(t) - before
		if n <= conns*perConn {
			if n < conns { // the accept loops at least: the count sees them
				t.Fatalf("%d connection goroutines for %d connections: the count misses them", n, conns)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines serve %d idle connections, want at most %d each", n, conns, perConn)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// Answering a keepalive allocates no more than its answer: thousands of
// idle sessions renew every TTL/3, and garbage per renewal is GC work the
// idle member pays.
func TestKeepAliveAllocations(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 60000, Secret: []byte("0123456789abcdef")})
	if err != nil || res.Err != nil {
		t.Fatal(err, res)
	}
	c := s.front.quic.NewConn("")
	c.Attach(res.Session)
	req := &session.Request{Type: session.MsgKeepAlive, Session: res.Session}
	if resp, err := s.front.quic.Call(ctx, c, req); err != nil || resp.TTLMillis != 60000 {
		t.Fatalf("keepalive answered %+v %v", resp, err)
	}
	if n := testing.AllocsPerRun(200, func() { s.front.keepAlive(ctx, c, req) }); n > 1 {
		t.Errorf("keepAlive handler: %.1f allocations per call, want at most 1 (the answer)", n)
	}
	if n := testing.AllocsPerRun(200, func() { s.front.quic.Call(ctx, c, req) }); n > maxKeepAliveAllocs {
		t.Errorf("keepalive through the front's Call: %.1f allocations per call, want at most %d", n, maxKeepAliveAllocs)
	}
}

// maxKeepAliveAllocs bounds the allocations of a keepalive's way through
// the front (admission, handler, metrics), answer included.
const maxKeepAliveAllocs = 1
