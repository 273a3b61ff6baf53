package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// pingServer serves liveness tests: Sync and Lock wait until the client
// cancels, LockNotices acknowledges and then waits, Get answers at once.
// It echoes pings (counting them per connection, in accept order) until
// mute is set, which makes the member look stopped: the requests stay
// unanswered and the pings unechoed, while QUIC itself still acknowledges
// packets.
type pingServer struct {
	ln     *Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mute   atomic.Bool
	mu     sync.Mutex
	pings  []*atomic.Int64 // per accepted connection
}

func startPingServer(t *testing.T) (*pingServer, *tls.Config) {
	t.Helper()
	srvTLS, cliTLS := devTLS(t)
	ln, err := Listen("127.0.0.1:0", srvTLS, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &pingServer{ln: ln, ctx: ctx, cancel: cancel}
	s.wg.Go(s.acceptLoop)
	t.Cleanup(func() {
		cancel()
		ln.Close()
		s.wg.Wait()
	})
	return s, cliTLS
}

func (s *pingServer) acceptLoop() {
	for {
		conn, err := s.ln.Accept(s.ctx)
		if err != nil {
			return
		}
		n := new(atomic.Int64)
		s.mu.Lock()
		s.pings = append(s.pings, n)
		s.mu.Unlock()
		s.wg.Go(func() { s.echo(conn, n) })
		s.wg.Go(func() {
			for {
				str, err := conn.AcceptStream(s.ctx)
				if err != nil {
					return
				}
				s.wg.Go(func() { s.serveStream(str, conn) })
			}
		})
	}
}

// echo is EchoPings with a count and a mute switch.
func (s *pingServer) echo(conn *Conn, n *atomic.Int64) {
	for {
		b, err := conn.ReceiveDatagram(s.ctx)
		if err != nil {
			return
		}
		n.Add(1)
		if !s.mute.Load() {
			_ = conn.SendDatagram(b)
		}
	}
}

func (s *pingServer) serveStream(str *quic.Stream, conn *Conn) {
	defer EndStream(str)
	req, err := ReadRequest(str, conn.MaxFrameSize())
	if err != nil {
		Reject(str, err)
		return
	}
	switch req.Type {
	case MsgGet:
		if !s.mute.Load() {
			Reply(str, &Response{Path: req.Path})
			return
		}
	case MsgLockNotices:
		if err := WriteResponse(str, &Response{}); err != nil {
			return
		}
	case MsgLock:
		if req.Node != "" { // a grant, and the stream's end
			Reply(str, &Response{Lock: LockGranted, Node: req.Node, Token: 1})
			return
		}
	}
	select {
	case <-str.Context().Done():
	case <-s.ctx.Done():
	}
}

func (s *pingServer) received(i int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.pings) {
		return 0
	}
	return s.pings[i].Load()
}

// waitCall runs RoundTrip of req on conn in the background.
func waitCall(ctx context.Context, conn *Conn, req *Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := RoundTrip(ctx, conn, req)
		done <- err
	}()
	return done
}

// udpRelay forwards datagrams between one client and a member, and drops
// every one of them while cut is set: to the client the member looks
// stopped (SIGSTOP, a crash, a partition), QUIC acknowledgements included.
type udpRelay struct {
	pc     net.PacketConn
	member net.Addr
	client atomic.Pointer[net.Addr]
	cut    atomic.Bool
}

func startRelay(t *testing.T, member string) *udpRelay {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to, err := net.ResolveUDPAddr("udp", member)
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{pc: pc, member: to}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if r.cut.Load() {
				continue
			}
			if from.String() == to.String() {
				if c := r.client.Load(); c != nil {
					_, _ = pc.WriteTo(buf[:n], *c)
				}
				continue
			}
			r.client.Store(&from)
			_, _ = pc.WriteTo(buf[:n], to)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	return r
}

func TestWatchdogClosesSilentMember(t *testing.T) {
	s, cli := startPingServer(t)
	const failure = 100 * time.Millisecond
	relay := startRelay(t, s.ln.Addr().String())
	conn := dialTest(t, relay.pc.LocalAddr().String(), cli, Config{FailureTimeout: failure})
	call := waitCall(testCtx(t), conn, &Request{Type: MsgSync})
	// A member that answers pings but not (yet) the call is alive: the
	// connection outlives several FailureTimeouts.
	waitPings(t, conn, 12) // 3 FailureTimeouts
	relay.cut.Store(true)
	muted := time.Now()
	select {
	case err := <-call:
		if err == nil {
			t.Fatal("call to a silent member succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call to a silent member still waits after 10s")
	}
	took := time.Since(muted)
	<-conn.Context().Done()
	if cause := context.Cause(conn.Context()); !strings.Contains(cause.Error(), "member silent") {
		t.Fatalf("connection closed by %v, want the watchdog", cause)
	}
	// FailureTimeout plus scheduling on a loaded machine, not the slow
	// member's slowFactor × FailureTimeout, nor QUIC's own idle timeout
	// (30s here).
	if took >= slowFactor*failure {
		t.Errorf("silent member noticed after %v, FailureTimeout %v", took, failure)
	}
}

// A member whose QUIC stack still acknowledges the pings but whose echoes
// do not come (it is starved for CPU, or stuck) is slow, not dead: it gets
// slowFactor × FailureTimeout before the connection is given up.
func TestWatchdogWaitsLongerForASlowMember(t *testing.T) {
	s, cli := startPingServer(t)
	const failure = 250 * time.Millisecond
	conn := dialTest(t, s.ln.Addr().String(), cli, Config{FailureTimeout: failure})
	call := waitCall(testCtx(t), conn, &Request{Type: MsgSync})
	waitPings(t, conn, 4)
	s.mute.Store(true)
	muted := time.Now()
	select {
	case err := <-call:
		if err == nil {
			t.Fatal("call to a muted member succeeded")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("call to a muted member still waits after 15s")
	}
	took := time.Since(muted)
	<-conn.Context().Done()
	if cause := context.Cause(conn.Context()); !strings.Contains(cause.Error(), "member silent") {
		t.Fatalf("connection closed by %v, want the watchdog", cause)
	}
	// A lower bound only: load can only make it later. Given up within
	// FailureTimeout (the dead member's bound), the client would leave a
	// live member and reconnect into the storm that slowed it.
	if took < (slowFactor/2)*failure {
		t.Errorf("a member that still acknowledges was given up after %v, want about %v", took, slowFactor*failure)
	}
}

func TestWatchdogIdleConnectionSendsNoPings(t *testing.T) {
	s, cli := startPingServer(t)
	const failure = 60 * time.Millisecond
	addr := s.ln.Addr().String()
	idle := dialTest(t, addr, cli, Config{FailureTimeout: failure}) // server conn 0
	ctx := testCtx(t)
	if _, err := RoundTrip(ctx, idle, &Request{Type: MsgGet, Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	// A standing lock notices stream (held locks) is not a waiting call.
	notices, err := OpenSubscription(ctx, idle, &Request{Type: MsgLockNotices})
	if err != nil {
		t.Fatal(err)
	}
	defer notices.Close()
	if _, err := notices.Next(); err != nil {
		t.Fatal(err)
	}
	busy := dialTest(t, addr, cli, Config{FailureTimeout: failure})
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	waitCall(bctx, busy, &Request{Type: MsgSync})
	waitPings(t, busy, 20) // 5 FailureTimeouts
	if n, got := idle.Pings(), s.received(0); n != 0 || got != 0 {
		t.Fatalf("idle connection sent %d pings (member got %d), want 0", n, got)
	}

	// The same connection pings while a call waits, and stops after.
	wctx, wcancel := context.WithCancel(ctx)
	call := waitCall(wctx, idle, &Request{Type: MsgSync})
	waitFor(t, "pings while a call waits", func() bool { return idle.Pings() >= 2 && s.received(0) >= 2 })
	wcancel()
	<-call
	after := idle.Pings()
	target := busy.Pings() + 20
	waitPings(t, busy, target)
	// At most the one the watchdog was about to send as the call ended.
	if n := idle.Pings(); n > after+1 {
		t.Fatalf("connection sent %d pings after its call ended, want at most 1", n-after)
	}
}

func TestEchoPingsEchoesPingsOnly(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	ln, err := Listen("127.0.0.1:0", srvTLS, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := testCtx(t)
	var echoed atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		conn.EchoPings(&echoed)
	}()
	conn := dialTest(t, ln.Addr().String(), cliTLS, Config{FailureTimeout: time.Minute})
	for _, b := range [][]byte{[]byte("not a ping"), []byte("12345678")} {
		if err := conn.SendDatagram(b); err != nil {
			t.Fatal(err)
		}
	}
	echo, err := conn.ReceiveDatagram(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(echo) != "12345678" {
		t.Fatalf("echo %q, want the ping only", echo)
	}
	conn.Close()
	<-done // EchoPings ends with the connection
	if n := echoed.Load(); n != 1 {
		t.Fatalf("%d echoes counted, want 1", n)
	}
}

func TestConfigValidateFailureTimeout(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Millisecond} {
		if err := (Config{FailureTimeout: d}).Validate(); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "FailureTimeout") {
			t.Errorf("FailureTimeout %v: Validate = %v, want ErrBadConfig naming it", d, err)
		}
	}
}

// waitPings waits until conn sent n pings, all answered: the connection
// must stay open.
func waitPings(t *testing.T, conn *Conn, n uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d pings", n), func() bool {
		if err := context.Cause(conn.Context()); err != nil {
			t.Fatalf("connection to a member that echoes closed after %d pings: %v", conn.Pings(), err)
		}
		return conn.Pings() >= n
	})
}

// An answer proves the member alive as well as an echo does: a call that
// waits while frames keep arriving on the connection costs no pings.
func TestWatchdogAnswersStandForEchoes(t *testing.T) {
	s, cli := startPingServer(t)
	const failure = 100 * time.Millisecond
	conn := dialTest(t, s.ln.Addr().String(), cli, Config{FailureTimeout: failure})
	ctx := testCtx(t)
	// A call waits (Sync is never answered) for the whole test.
	call := waitCall(ctx, conn, &Request{Type: MsgSync})
	// Gets are answered at once: back to back for 6 FailureTimeouts they
	// keep the connection hearing from the member all along. The watchdog
	// may ping after a quarter of FailureTimeout without an answer, so a
	// window counts only if every answer came within half that: on a
	// loaded machine a slower one may rightly cost a ping, and the window
	// starts again.
	clean := false
	for attempt := 0; attempt < 20 && !clean; attempt++ {
		before := conn.Pings()
		clean = true
		for start := time.Now(); time.Since(start) < 6*failure; {
			t0 := time.Now()
			if _, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: "/x"}); err != nil {
				t.Fatal(err)
			}
			if time.Since(t0) >= failure/8 {
				clean = false
			}
		}
		if n := conn.Pings() - before; clean && n != 0 {
			t.Fatalf("%d pings sent while answers kept arriving, each within %v", n, failure/8)
		}
	}
	if !clean {
		t.Fatalf("no window of %v in 20 with every answer within %v: the machine is too loaded for this test", 6*failure, failure/8)
	}
	// Control: with only the waiting call, the watchdog pings.
	waitPings(t, conn, 4)
	select {
	case err := <-call:
		t.Fatalf("the waiting call ended: %v", err)
	default:
	}
}

// TestWatchdogPatienceWithASlowMember: a member that took long to let the
// client in (its handshake; a reconnect storm) is given that long, twice,
// before its silence closes the connection, for patienceWindow after the
// connection was made; afterwards FailureTimeout rules again.
func TestWatchdogPatienceWithASlowMember(t *testing.T) {
	s, cli := startPingServer(t)
	const failure = 100 * time.Millisecond
	conn := dialTest(t, s.ln.Addr().String(), cli, Config{FailureTimeout: failure})
	dog := conn.dog
	if want := min(2*time.Second, maxPatience); newWatchdog(conn, failure, time.Second).patience != want {
		t.Fatalf("a 1s handshake gives patience %v, want %v", newWatchdog(conn, failure, time.Second).patience, want)
	}
	if p := newWatchdog(conn, failure, time.Minute).patience; p != maxPatience {
		t.Fatalf("a 1m handshake gives patience %v, want the cap %v", p, maxPatience)
	}
	dog.patience = 3 * time.Second
	if l := dog.limitFor(conn.ConnectionStats()); l < 3*time.Second {
		t.Fatalf("limit %v right after a slow admission, want at least the patience 3s", l)
	}
	dog.start = dog.start.Add(-patienceWindow)
	if l := dog.limitFor(conn.ConnectionStats()); l >= 3*time.Second {
		t.Fatalf("limit %v past patienceWindow, want FailureTimeout (or the path's probe timeouts) again", l)
	}
}

// A stream the server ended stops counting as a waiting call: a lock
// stream ends at its grant, and a count left behind made the connection
// ping every quarter of FailureTimeout for the rest of its life (every
// client that ever waited for a lock, at 13 pings a second each).
func TestStreamEndedStopsWaiting(t *testing.T) {
	s, cli := startPingServer(t)
	conn := dialTest(t, s.ln.Addr().String(), cli, Config{FailureTimeout: 60 * time.Millisecond})
	ctx := testCtx(t)
	sr, err := OpenStreaming(ctx, conn, &Request{Type: MsgLock, Path: "/l", Node: "/l/lock-1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := conn.dog.waiting.Load(); n != 1 {
		t.Fatalf("%d calls waiting while the lock stream is open, want 1", n)
	}
	if resp, err := sr.Next(); err != nil || resp.Lock != LockGranted {
		t.Fatalf("grant: %+v %v", resp, err)
	}
	if _, err := sr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the grant: %v, want the stream's end", err)
	}
	if n := conn.dog.waiting.Load(); n != 0 {
		t.Fatalf("%d calls waiting after the server ended the stream, want 0", n)
	}

	// A subscription that waits from some frame on (a lock waiter next
	// in line) stops waiting when it ends too, and Close after the end
	// counts nothing twice.
	sub, err := OpenSubscription(ctx, conn, &Request{Type: MsgLock, Path: "/l", Node: "/l/lock-2"})
	if err != nil {
		t.Fatal(err)
	}
	if n := conn.dog.waiting.Load(); n != 0 {
		t.Fatalf("%d calls waiting with a subscription open, want 0", n)
	}
	sub.Waiting(true)
	sub.Waiting(true)
	if n := conn.dog.waiting.Load(); n != 1 {
		t.Fatalf("%d calls waiting after Waiting(true) twice, want 1", n)
	}
	if _, err := sub.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the grant: %v, want the stream's end", err)
	}
	sub.Close()
	sub.Waiting(true)
	if n := conn.dog.waiting.Load(); n != 0 {
		t.Fatalf("%d calls waiting after the subscription ended, want 0", n)
	}
}
